"""The stand-alone pull script (dataplatform_pull.py: standard library only, imports nothing from the
project) and the endpoint that serves it, so a trainer's machine needs no more than Python to pull an export."""
