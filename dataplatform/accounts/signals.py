"""What the accounts services announce to the floors above them, which connect to it in their app's ready()."""

from django.dispatch import Signal

# Sent by `services.create_project` inside its transaction, once the project row exists and before anything else is
# written to it (sender: the Project class; keyword `project`). Only the service sends it: a project written
# otherwise (a test's factory, SQL) is not announced.
project_created = Signal()
