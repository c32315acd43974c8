# Everything a fresh clone needs is installed by these targets.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PG_URL ?= postgres://root@127.0.0.1:5432/test
MARIADB_URL ?= mysql://alkqueue:alkqueue@127.0.0.1:3306/alkqueue

# The first interpreter >= 3.12 that actually runs (pyenv shims exist but fail when the
# version is not selected, so each candidate is executed, not just looked up).
PYTHON_BOOT := $(shell for c in python3.13 python3.12 "$$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python3" "$$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python3"; do \
	if "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then echo "$$c"; break; fi; done)

.PHONY: venv test test-pg test-sqlite test-mariadb test-orm test-compat lint demo admin postgres \
	mariadb mysqlclient clean

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON_BOOT)" || { echo "no Python >= 3.12 found (tried python3.13, python3.12, pyenv 3.13.0)"; exit 1; }
	"$(PYTHON_BOOT)" -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=25.1"
	$(PY) -m pip install -q -e . --group dev
	touch $@

# The German catalogue (django_alkqueue/locale/): compiled here, so every target that runs the
# code has the .mo of the .po it has. Django's compilemessages runs GNU gettext's msgfmt, the
# tool translators use too (Debian's gettext). The .mo is committed as well, so that an install
# from git or an sdist built without gettext still speaks German; tests/test_translations.py
# checks that it matches the .po.
venv: $(VENV)/.installed /usr/bin/msgfmt
	@cd django_alkqueue && ../$(VENV)/bin/django-admin compilemessages -v 0

/usr/bin/msgfmt:
	apt-get update && apt-get install -y gettext

# After changing a user-facing string: refresh the catalogue (then translate what is new in
# django_alkqueue/locale/de/LC_MESSAGES/django.po, docs/admin.md "Translating").
.PHONY: makemessages
makemessages: venv
	cd django_alkqueue && DATABASE_URL= PYTHONPATH=.. DJANGO_SETTINGS_MODULE=testproject.settings \
	  ../$(VENV)/bin/django-admin makemessages -l de --add-location=file --no-obsolete
	cd django_alkqueue && ../$(VENV)/bin/django-admin compilemessages -v 0

postgres:
	@pg_isready -h 127.0.0.1 -p 5432 -q || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@for i in $$(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && exit 0; sleep 1; done; \
	  echo "PostgreSQL is not reachable on 127.0.0.1:5432"; exit 1

# The admin's browser tests drive Debian's Chromium; Playwright never downloads a browser.
/usr/bin/chromium:
	apt-get update && apt-get install -y chromium

# The PgBouncer tests (tests/test_pgbouncer.py) and the bench's scale-out run
# (bench/scale_out.py) run Debian's pgbouncer in transaction mode.
/usr/sbin/pgbouncer:
	apt-get update && apt-get install -y pgbouncer

# MariaDB (the ORM dialect, tests/ on MySQL's kin): Debian's server, started if it is down, with
# a database and a user made by root over the unix socket. The user may create the test
# databases (test_alkqueue_<pid>) and the bench's (bench_*, bench/README.md) and read
# InnoDB's metrics (the admin's health), nothing else. A payload travels in one packet: the
# long chaos run's 16 MiB payload limit needs max_allowed_packet above MariaDB's default 16 MiB
# (docs/databases.md).
MARIADB_SQL := CREATE DATABASE IF NOT EXISTS alkqueue CHARACTER SET utf8mb4; \
	SET GLOBAL max_allowed_packet = 64 * 1024 * 1024; \
	CREATE USER IF NOT EXISTS "alkqueue"@"localhost" IDENTIFIED BY "alkqueue"; \
	CREATE USER IF NOT EXISTS "alkqueue"@"127.0.0.1" IDENTIFIED BY "alkqueue"; \
	GRANT ALL PRIVILEGES ON alkqueue.* TO "alkqueue"@"localhost", "alkqueue"@"127.0.0.1"; \
	GRANT ALL PRIVILEGES ON `test\_alkqueue%`.* TO "alkqueue"@"localhost", "alkqueue"@"127.0.0.1"; \
	GRANT ALL PRIVILEGES ON `bench\_%`.* TO "alkqueue"@"localhost", "alkqueue"@"127.0.0.1"; \
	GRANT PROCESS ON *.* TO "alkqueue"@"localhost", "alkqueue"@"127.0.0.1";

/usr/sbin/mariadbd:
	apt-get update && apt-get install -y mariadb-server

mariadb: /usr/sbin/mariadbd
	@mariadb-admin -uroot ping >/dev/null 2>&1 || { \
	  install -d -o mysql -g mysql /run/mysqld; \
	  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql; }
	@for i in $$(seq 1 30); do mariadb-admin -uroot ping >/dev/null 2>&1 && break; sleep 1; done
	@mariadb -uroot -e '$(MARIADB_SQL)'

# mysqlclient builds against libmariadb; pkg-config finds it. Every venv that installs the
# [mysql] extra (the project's, the bench's, the package check's) needs these first.
.PHONY: mysql-build-deps
mysql-build-deps:
	@dpkg -s libmariadb-dev pkg-config >/dev/null 2>&1 || \
	  { apt-get update && apt-get install -y libmariadb-dev pkg-config; }

mysqlclient: venv mysql-build-deps
	@$(PY) -c 'import MySQLdb' 2>/dev/null || $(PY) -m pip install -q -e '.[mysql]'

# The suite runs in TEST_PROCESSES processes (pytest-xdist), each on a test database of its
# own: most tests wait on worker subprocesses and the database, so twice the cores pays.
# Work stealing: a process that runs out takes half of the longest queue left, so the
# suite's tail is not one process's last few slow tests while the others sit idle.
# Then the tests marked serial (they restart or reconfigure the shared server) run alone.
# Exit status 5 means that PYTEST_ARGS selected no serial test.
TEST_PROCESSES ?= 4
define run_suite
	$(1) -m pytest -p no:cacheprovider -n $(TEST_PROCESSES) --dist worksteal -m "not serial" $(PYTEST_ARGS)
	$(1) -m pytest -p no:cacheprovider -m serial $(PYTEST_ARGS) || test $$? -eq 5
endef

# On SQLite and MariaDB only the parallel part: every serial test is postgres_only (the
# suite refuses one that is not), so there a serial run would only collect the suite to
# skip them.
define run_parallel
	$(1) -m pytest -p no:cacheprovider -n $(TEST_PROCESSES) --dist worksteal -m "not serial" $(PYTEST_ARGS)
endef

test: venv postgres mariadb mysqlclient /usr/bin/chromium /usr/sbin/pgbouncer
	$(MAKE) --no-print-directory test-pg
	$(MAKE) --no-print-directory test-sqlite
	$(MAKE) --no-print-directory test-mariadb

test-mariadb: venv mariadb mysqlclient
	$(call run_parallel,DATABASE_URL=$(MARIADB_URL) $(PY))

# The whole suite on PostgreSQL and on SQLite through the ORM dialect (sql/orm.py), the
# reference their own dialects are checked against. Not in .ci/run (it would double the
# suite's time there): run it before a release and after any change to a dialect.
test-orm: venv postgres
	$(call run_suite,ALKQUEUE_DIALECT=orm DATABASE_URL=$(PG_URL) $(PY))
	$(call run_suite,ALKQUEUE_DIALECT=orm DATABASE_URL= $(PY))

test-pg: venv
	$(call run_suite,DATABASE_URL=$(PG_URL) $(PY))

test-sqlite: venv
	$(call run_parallel,DATABASE_URL= $(PY))

# The admin's screenshots in docs/images, taken by the browser tests on PostgreSQL
# (tests/test_admin_browser.py, DOC_IMAGES). Not in CI: run it after changing a page.
.PHONY: screenshots
screenshots: venv postgres /usr/bin/chromium
	ALKQUEUE_DOC_IMAGES=1 DATABASE_URL=$(PG_URL) $(PY) -m pytest -p no:cacheprovider -q \
	  tests/test_admin_browser.py tests/test_admin_browser_console.py tests/test_admin_browser_widths.py \
	  tests/test_admin_browser_workflows.py

# Django 5.2 LTS on the machine's default python3 (3.11), with the django-tasks backport, and
# the oldest psycopg supported (3.2) in its pure Python build over the system's libpq: make
# test covers the newest binary one. It runs from the source tree: the package itself
# declares Python >= 3.12.
COMPAT_VENV := .venv-compat
COMPAT_PY := $(COMPAT_VENV)/bin/python
COMPAT_DEPS := "Django>=5.2,<6" "django-tasks>=0.8" "psycopg>=3.2,<3.3" "croniter>=2.0" \
	pytest pytest-django pytest-xdist hypothesis dj-database-url django-extensions playwright \
	"prometheus-client>=0.20" "python-json-logger>=2" "opentelemetry-api>=1.27" "opentelemetry-sdk>=1.27"

$(COMPAT_VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(COMPAT_VENV)
	$(COMPAT_PY) -m pip install -q --upgrade pip
	$(COMPAT_PY) -m pip install -q $(COMPAT_DEPS)
	touch $@

test-compat: $(COMPAT_VENV)/.installed postgres /usr/sbin/pgbouncer
	$(call run_suite,DATABASE_URL=$(PG_URL) PYTHONPATH=. PSYCOPG_IMPL=python $(COMPAT_PY))

# The long chaos scenarios (tests/chaos, CHAOS_LONG=1) on PostgreSQL, then on SQLite and on
# MariaDB (those that run there: docs/reliability.md says which), then flow control's worker
# tests at the issue's full sizes (FLOW_CONTROL_FULL=1, tests/test_flow_control_workers.py)
# and fair share's (FAIR_SHARE_FULL=1, tests/test_fair_share_workers.py), then the queue API's
# state machine at 50 random sequences on each database (STATE_MACHINE_FULL=1,
# tests/test_state_machine.py; make test runs 15), then docs/reliability.md from the records, even when one failed (the page shows it) before
# the target fails.
# Scenarios 3 and 4 need root (they skip otherwise).
.PHONY: chaos
chaos: venv postgres mariadb mysqlclient
	rm -rf test-artifacts/chaos/long
	CHAOS_LONG=1 DATABASE_URL=$(PG_URL) $(PY) -m pytest -p no:cacheprovider tests/chaos $(PYTEST_ARGS); \
	pg=$$?; \
	CHAOS_LONG=1 DATABASE_URL= $(PY) -m pytest -p no:cacheprovider tests/chaos $(PYTEST_ARGS); \
	sqlite=$$?; \
	CHAOS_LONG=1 DATABASE_URL=$(MARIADB_URL) $(PY) -m pytest -p no:cacheprovider tests/chaos $(PYTEST_ARGS); \
	mariadb=$$?; \
	FLOW_CONTROL_FULL=1 DATABASE_URL=$(PG_URL) $(PY) -m pytest -p no:cacheprovider \
	  tests/test_flow_control_workers.py $(PYTEST_ARGS) && \
	FLOW_CONTROL_FULL=1 DATABASE_URL= $(PY) -m pytest -p no:cacheprovider \
	  tests/test_flow_control_workers.py $(PYTEST_ARGS) && \
	FAIR_SHARE_FULL=1 DATABASE_URL=$(PG_URL) $(PY) -m pytest -p no:cacheprovider \
	  tests/test_fair_share_workers.py $(PYTEST_ARGS) && \
	FAIR_SHARE_FULL=1 DATABASE_URL= $(PY) -m pytest -p no:cacheprovider \
	  tests/test_fair_share_workers.py $(PYTEST_ARGS) && \
	STATE_MACHINE_FULL=1 DATABASE_URL=$(PG_URL) $(PY) -m pytest -p no:cacheprovider \
	  tests/test_state_machine.py $(PYTEST_ARGS) && \
	STATE_MACHINE_FULL=1 DATABASE_URL= $(PY) -m pytest -p no:cacheprovider \
	  tests/test_state_machine.py $(PYTEST_ARGS) && \
	STATE_MACHINE_FULL=1 DATABASE_URL=$(MARIADB_URL) $(PY) -m pytest -p no:cacheprovider \
	  tests/test_state_machine.py $(PYTEST_ARGS); \
	flow=$$?; \
	$(PY) -m tests.chaos.render --mode long && test $$pg -eq 0 && test $$sqlite -eq 0 && \
	  test $$mariadb -eq 0 && test $$flow -eq 0

# The wheel in a fresh venv with no extras on SQLite, then with [mysql] on MariaDB.
.PHONY: package-check
package-check: venv mariadb mysql-build-deps
	bash .ci/package_check.sh "$(PYTHON_BOOT)" "$(MARIADB_URL)"

# The models diagram of docs/architecture.md (docs/images/models.svg): django-extensions'
# graph_models writes the Graphviz source (its --dot output needs no Python binding) and
# Debian's graphviz draws it, the tables packed six to a row (they share few foreign keys:
# a job's id is a plain column, docs/workflows.md). Run it after changing a model;
# tests/test_docs.py checks that the diagram names every model.
.PHONY: models-diagram
/usr/bin/dot:
	apt-get update && apt-get install -y graphviz

models-diagram: venv /usr/bin/dot
	DATABASE_URL= $(PY) manage.py graph_models django_alkqueue --dot -o docs/images/models.dot
	dot -Tsvg -Gpack=true -Gpackmode=array_r6 docs/images/models.dot -o docs/images/models.svg
	rm docs/images/models.dot

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/vulture

DEMO_ENV := DATABASE_URL= ALKQUEUE_SQLITE_NAME=testproject/demo.sqlite3 ALKQUEUE_DEMO=1

demo: venv
	rm -f testproject/demo.sqlite3*
	$(DEMO_ENV) $(PY) manage.py migrate -v 0
	$(DEMO_ENV) $(PY) manage.py alk_demo

admin: venv
	$(DEMO_ENV) $(PY) manage.py runserver 127.0.0.1:8000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The benchmark harness (bench/README.md): its own venv with the peers, then bench/run.py;
# django-alkqueue runs on PostgreSQL, once more on the local MariaDB (the ORM dialect) and on
# a SQLite file, each beside its engine's raw loops (psycopg, mysqlclient, sqlite3).
# bench: the full run (N = 20,000, 3 repetitions, the 1M-row steps), which writes
# bench/results/full.* and rewrites docs/benchmarks.md from bench/benchmarks.md.tmpl;
# bench-quick: N = 2,000, 1 repetition, no 1M steps (CI), which writes bench/results/quick.*.
.PHONY: bench bench-quick
BENCH_VENV := bench/.venv
BENCH_PY := $(BENCH_VENV)/bin/python

$(BENCH_VENV)/.installed: pyproject.toml bench/requirements.txt | mysql-build-deps
	@test -n "$(PYTHON_BOOT)" || { echo "no Python >= 3.12 found (tried python3.13, python3.12, pyenv 3.13.0)"; exit 1; }
	"$(PYTHON_BOOT)" -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install -q --upgrade pip
	$(BENCH_PY) -m pip install -q -e '.[postgres,mysql]' -r bench/requirements.txt
	touch $@

# The Celery peers' brokers (bench/systems/celery.py): the local Redis and RabbitMQ, started
# if they are down; where either is missing, its Celery systems fail and the run goes on.
.PHONY: brokers
brokers:
	-@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || redis-server --daemonize yes \
	  --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
	-@timeout 1 bash -c '</dev/tcp/127.0.0.1/5672' 2>/dev/null || { rabbitmq-server -detached; \
	  for i in $$(seq 1 60); do timeout 1 bash -c '</dev/tcp/127.0.0.1/5672' 2>/dev/null && break; \
	  sleep 1; done; }

bench: $(BENCH_VENV)/.installed postgres mariadb brokers /usr/sbin/pgbouncer
	$(BENCH_PY) -m bench.run $(BENCH_ARGS)
	$(BENCH_PY) -m bench.flow_control
	$(BENCH_PY) -m bench.fair_share
	$(BENCH_PY) -m bench.cancel_latency
	$(BENCH_PY) -m bench.process_pool
	$(BENCH_PY) -m bench.kept_history
	$(BENCH_PY) -m bench.held_vacuum
	$(BENCH_PY) -m bench.observability
	$(BENCH_PY) -m bench.workflows
	$(BENCH_PY) -m bench.durable_steps
	$(BENCH_PY) -m bench.scale_out
	$(BENCH_PY) -m bench.defaults

# make soak: hours of load in small, not in CI (bench/soak.py, docs/benchmarks.md "Hours of
# load"): the drain capacity, then SOAK_MINUTES of steady enqueue at half of it; writes
# bench/results/soak.*, docs/images/soak.png and its section of docs/benchmarks.md.
.PHONY: soak
SOAK_MINUTES ?= 30
soak: $(BENCH_VENV)/.installed postgres
	$(BENCH_PY) -m bench.soak --minutes $(SOAK_MINUTES)

# CI's check that the harness runs: every system but three of the four Celery ones, which
# differ from the fourth only in their pool and broker (make bench measures them all); the
# peers drain 200 jobs, ours and the raw loops 2,000 (bench/run.py QUICK_PEERS).
BENCH_QUICK_SYSTEMS ?= raw,alkqueue,raw_mariadb,alkqueue_mariadb,raw_sqlite,alkqueue_sqlite,django_tasks_db,procrastinate,vtasks,celery_redis_threads
bench-quick: $(BENCH_VENV)/.installed postgres mariadb brokers /usr/sbin/pgbouncer
	$(BENCH_PY) -m bench.run --quick --systems $(BENCH_QUICK_SYSTEMS) $(BENCH_ARGS)
	$(BENCH_PY) -m bench.flow_control --quick
	$(BENCH_PY) -m bench.fair_share --quick
	$(BENCH_PY) -m bench.cancel_latency --quick
	$(BENCH_PY) -m bench.process_pool --quick
	$(BENCH_PY) -m bench.kept_history --quick
	$(BENCH_PY) -m bench.held_vacuum --quick
	$(BENCH_PY) -m bench.observability --quick
	$(BENCH_PY) -m bench.workflows --quick
	$(BENCH_PY) -m bench.durable_steps --quick
	$(BENCH_PY) -m bench.scale_out --quick
	$(BENCH_PY) -m bench.defaults --quick
