# Shortcuts over cargo and deploy/. `make build && sudo make install` puts sheetq on a VM.

CARGO ?= cargo
BINARY ?= target/release/sheetq
IMAGE ?= sheetq:latest
# Extra flags for deploy/install.sh, e.g. INSTALL_FLAGS="--key /path/key.json --start".
INSTALL_FLAGS ?=

.PHONY: build test demo lint install install-dry-run image

build:
	$(CARGO) build --release --locked --bin sheetq

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
	docker build -f deploy/Dockerfile -t $(IMAGE) .
