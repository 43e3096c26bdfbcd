"""What starting a job takes: `JobCreateSerializer`, run by the API view (on the JSON body) and by the project
page's form alike (dataplatform/inputs.py); the job kind's own serializer then checks its params
(services.validate_params)."""

from rest_framework import serializers
from rest_framework.utils import html

from dataplatform.inputs import InputSerializer

# Fields of a form that are not the job's params.
FORM_FIELDS = ("kind", "csrfmiddlewaretoken")


class ParamsField(serializers.DictField):
    """The job kind's params: an object; a form sends each param as a field of its own, beside `kind`."""

    def get_value(self, dictionary):
        if html.is_html_input(dictionary):
            return {name: value for name, value in dictionary.items() if name not in FORM_FIELDS}
        return super().get_value(dictionary)


class JobCreateSerializer(InputSerializer):
    kind = serializers.CharField()
    params = ParamsField(default=dict, help_text="the kind's parameters; a form sends each as a field of its own")
