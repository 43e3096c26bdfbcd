"""What the HTML import pages share: running an importer on a form's upload, and what the result shows."""

from dataplatform.inputs import read

from .inputs import ImportOptions
from .readers import FileTooLarge, check_upload_size, read_error
from .report import ImportReport


def page_import(request, importer, **arguments) -> dict | None:
    """Run `importer` on a page form's uploaded `file` (with its dry_run and skip_bad_lines boxes) and
    return what the `frontend/import_result.html` partial shows; None when no file was chosen."""
    upload = request.FILES.get("file")
    if upload is None:
        return None
    options = read(ImportOptions, request.POST)  # refused (400): a box whose value is not a yes or a no
    try:
        check_upload_size(upload)
    except FileTooLarge as exc:  # refused whole from its size: the importer never sees it
        report = ImportReport(file=upload.name, dry_run=options["dry_run"], errors=[read_error(upload.name, 0, str(exc))])
    else:
        report = importer(lines=upload, file=upload.name, **options, **arguments)
    report = report.as_dict()
    # The report keeps the first errors (report.MAX_ERRORS_KEPT) and counts the rest.
    return {"report": report, "errors": report["errors"],
            "more_errors": report["error_count"] - len(report["errors"]), "written": report["created"] > 0,
            # an error on line 0 is about the whole file (too big, empty...): no line to fix or skip
            "file_refused": any(error["line"] == 0 for error in report["errors"])}
