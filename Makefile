# `make demo` and `make test` set everything up on a fresh machine: they create .venv when
# missing, install the project into it, check Java, then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-long test-fast cluster-test check-java venv clean peers-setup browser-setup broker-setup

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10+ needed, found " + sys.version' || \
	  { echo "fedq needs Python 3.10 or newer as python3 (or: make PYTHON=/path/to/python3.11)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PYTHON) scripts/heartbeat.py "upgrading pip in $(VENV)" -- $(PY) -m pip install --quiet --upgrade pip || true
	@$(PYTHON) scripts/heartbeat.py "installing fedq and its dependencies into $(VENV) (pyspark is large: a first install takes a minute or more)" -- $(PY) -m pip install --quiet -e '.[test]' || true
	@$(PY) -c 'import pyspark, duckdb, sqlglot, pyarrow, pydantic, prometheus_client, federation' || \
	  { echo "installation into $(VENV) failed; see the pip output above"; exit 1; }
	@touch $(STAMP)

venv: $(STAMP)

check-java:
	@sh scripts/check_java.sh

demo: venv check-java
	$(PY) -m benchmarks.demo

# two worker processes (pytest-xdist), whole files each: the JVM-free tests are CPU-bound
# and a Spark test leaves a core idle between micro-batches. `test` runs a pairwise sample
# of the exhaustive matrix (every placement, kill point and batch size: tests marked long)
test: venv check-java
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not long"

# the whole matrix (39 minutes on two cores on 2026-12-01; make test: 12, 2026-12-02)
test-long: venv check-java
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# the fast lane: every test of make test that starts no JVM (no Java needed)
test-fast: venv
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not spark and not cluster and not long"

# a Spark standalone master and worker on this machine, CQ1 auto against it (also in `test`)
cluster-test: venv check-java
	$(PY) -m pytest -q -m cluster

# PyFlink for `python -m benchmarks.peers`, in a virtualenv of its own: apache-flink 2.3
# pins numpy < 2.2, pandas < 2.3 and pyarrow < 17 (through apache-beam), below fedq's
peers-setup: check-java
	@test -x .venv-flink/bin/python || $(PYTHON) -m venv .venv-flink
	@$(PYTHON) scripts/heartbeat.py "installing apache-flink 2.3.0 into .venv-flink (about 850 MB)" -- .venv-flink/bin/python -m pip install --quiet 'apache-flink==2.3.0'
	@.venv-flink/bin/python -c 'import pyflink; print("PyFlink ready in .venv-flink")'

# headless Chromium for the status page's browser test (tests/test_metrics.py, skipped
# without it): Debian's package where apt-get runs as root; .ci/run calls this first
browser-setup:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  $(PYTHON) scripts/heartbeat.py "installing chromium (Debian) for the status page's browser test" -- \
	  sh -c 'export DEBIAN_FRONTEND=noninteractive; timeout 600 apt-get install -y -q chromium >/dev/null 2>&1 || { timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 600 apt-get install -y -q chromium >/dev/null 2>&1; }'; } || \
	  echo "chromium is not installed: the status page's browser test will be skipped"

# Mosquitto for the tests against a broker with TLS and a password file and for kill -9
# with a redelivering broker (tests/test_mqtt_secure.py, test_mqtt.py; skipped without it;
# the embedded amqtt broker stays the default): Debian's package where apt-get runs as root
broker-setup:
	@command -v mosquitto >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  $(PYTHON) scripts/heartbeat.py "installing mosquitto (Debian) for the secure-broker tests" -- \
	  sh -c 'export DEBIAN_FRONTEND=noninteractive; timeout 300 apt-get install -y -q mosquitto >/dev/null 2>&1 || { timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 300 apt-get install -y -q mosquitto >/dev/null 2>&1; }'; } || \
	  echo "mosquitto is not installed: the tests against it will be skipped"

clean:
	rm -rf $(VENV) .pytest_cache
