"""What an import takes besides its file: `ImportOptions`, read by the import pages (pages.py) and the API's
uploads (apiutils.import_upload) alike (dataplatform/inputs.py)."""

from dataplatform.inputs import Flag, InputSerializer


class ImportOptions(InputSerializer):
    dry_run = Flag(default=False, help_text="report the file's errors without writing anything")
    skip_bad_lines = Flag(default=False, help_text="import the good lines of a file that has bad ones")
