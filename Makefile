# Shortcuts over cargo and deploy/. `make build && sudo make install` puts sheetq on a VM.

CARGO ?= cargo
BINARY ?= target/release/sheetq
# The crate's version, which deploy/k8s/kustomization.yaml's image tag matches.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE ?= sheetq:$(VERSION)
# Extra flags for deploy/install.sh, e.g. INSTALL_FLAGS="--key /path/key.json --start".
INSTALL_FLAGS ?=

.PHONY: build test demo lint install install-dry-run image

# The production binary: without the embedded emulator, demo and bench (cargo feature
# `emulator`, on by default for development).
build:
	$(CARGO) build --release --locked --no-default-features --bin sheetq

test:
	$(CARGO) test

# The local demo: an embedded spreadsheet, two daemons, no Google account needed.
demo:
	$(CARGO) run --release -- demo

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

# Does not build: run `make build` as yourself first, then this as root.
install:
	deploy/install.sh --binary $(BINARY) $(INSTALL_FLAGS)

install-dry-run:
	deploy/install.sh --dry-run --binary $(BINARY) $(INSTALL_FLAGS)

image:
	docker build -f deploy/Dockerfile --build-arg SHEETQ_COMMIT=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) -t $(IMAGE) .
