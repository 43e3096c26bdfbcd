from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import services
from .selectors import last_capability_report, platform_status


@login_required
def system_page(request):
    statuses = platform_status()
    if request.headers.get("HX-Request"):
        return render(request, "system/_status.html", {"statuses": statuses, "all_ok": all(s.ok for s in statuses)})
    return render(request, "system/system.html", {"statuses": statuses, "all_ok": all(s.ok for s in statuses),
                                                  "report": last_capability_report()})


@login_required
@require_POST
def system_capabilities(request):
    """Check the model server's capabilities now (a few model calls); htmx swaps the report in, a plain form post
    comes back to the page, which shows it."""
    report = services.run_capability_check()
    if request.headers.get("HX-Request"):
        return render(request, "system/_capabilities.html", {"report": report})
    return redirect("system")
