from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .selectors import platform_status


@login_required
def system_page(request):
    statuses = platform_status()
    template = "system/_status.html" if request.headers.get("HX-Request") else "system/system.html"
    return render(request, template, {"statuses": statuses, "all_ok": all(s.ok for s in statuses)})
