# sqmkit — see README.md. `make demo` and `make test` work on a fresh Debian
# machine: both install what is missing first (scripts/deps.sh).
GO      ?= go
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'

.PHONY: all build deps test unit lab-ci lab demo bench cross fuzz clean kerneltests router size harsh FORCE

all: build

build: $(BIN)/sqmkit $(BIN)/sqmkit-router $(BIN)/sqmkit-lab $(BIN)/tcshim $(BIN)/labtests $(BIN)/browser.test

# Packages with TestLab* tests: they need the guest kernel (sfq, prio,
# police, fq_codel), skip on the host, and sqmkit-lab runs them in the VM.
LABTESTS := internal/doctor internal/apply

$(BIN)/sqmkit: FORCE
	$(GOBUILD) -o $@ ./cmd/sqmkit

# The router build (build tag router: what the OpenWrt package installs),
# for this machine: the lab's router namespace runs it.
$(BIN)/sqmkit-router: FORCE
	CGO_ENABLED=0 $(GO) build -tags router -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sqmkit

# The lab runner, and the tc shim the tests and the lab use (internal/tc/tcshim).
$(BIN)/sqmkit-lab: FORCE
	$(GOBUILD) -o $@ ./lab

$(BIN)/tcshim: FORCE
	$(GOBUILD) -o $@ ./internal/tc/tcshim

# The browser's part of the lab's journey (openwrt/browser's TestJourney),
# which sqmkit-lab runs on the host; its own module (chromedp).
$(BIN)/browser.test: FORCE
	cd openwrt/browser && CGO_ENABLED=0 $(GO) test -c -o ../../$@ .

$(BIN)/labtests: FORCE
	@mkdir -p $@
	rm -f $@/*.test
	set -e; for p in $(LABTESTS); do CGO_ENABLED=0 $(GO) test -c -o $@/$$(echo $$p | tr / -).test ./$$p; done

deps:
	scripts/deps.sh

# Every test: unit and host-kernel tests, then the lab scenarios CI must
# pass on OpenWrt 25.12's kernel series, and cake_mq beside cake on 7.x
# (scripts/kernels.sh fetches both kernels once). Exit 3 of a lab run: it
# could not measure something on this host, which is not a pass.
# Each part is timed (sqmkit-lab part, gotest), and the end prints the
# table, the tests skipped and those that absorbed a slow host.
LAB := $(CURDIR)/$(BIN)/sqmkit-lab
test: deps build
	@rm -f $(BIN)/test-parts.tsv
	$(LAB) part vet -- sh -c '$(GO) vet ./... && cd openwrt/browser && $(GO) vet ./...'
	$(LAB) gotest unit -- -count=1 -timeout 20m ./...
	cd openwrt/browser && $(LAB) gotest browser -- -count=1 -timeout 10m ./...
	$(LAB) part lab-ci -- $(LAB) ci --kernel 6.12
	@$(LAB) parts

unit: build
	$(GO) test -count=1 ./...
	cd openwrt/browser && $(GO) test -count=1 ./...

lab-ci: deps build
	$(BIN)/sqmkit-lab ci --kernel 6.12
	$(BIN)/sqmkit-lab mq --kernel 7 --profiles cable

# Only the Go tests that need the guest kernel (TestLab* in bin/labtests),
# on each kernel.
kerneltests: deps build
	set -e; for k in 6.1 6.12 7; do $(BIN)/sqmkit-lab kerneltests --kernel $$k; done

# The full matrix: every profile × every backend, on each kernel, cake
# beside cake_mq on 7.x, and autorate against cake-autorate on the recorded
# links where ../shared holds them (docs/results.md's table), then tune on
# each (200 s: the shorter ones repeat, as mahimahi's link does).
RECORDED := $(abspath ../shared/traces/mahimahi)
TRACE_CTLS := none,static-mean,sqmkit,ext:cake-autorate=lab/ext/cake-autorate,ext:cake-autorate-matched=lab/ext/cake-autorate
lab: deps build
	$(BIN)/sqmkit-lab all --kernel 6.1,6.12,7
	$(BIN)/sqmkit-lab mq --kernel 7
	if [ -d $(RECORDED) ]; then t=0; $(BIN)/sqmkit-lab trace --trace $(RECORDED) --seconds 120 --controllers $(TRACE_CTLS) || t=1; \
		$(BIN)/sqmkit-lab trace --trace $(RECORDED) --seconds 200 --controllers tune && exit $$t; \
	else echo "make lab: no recorded links at $(RECORDED): their table is not run"; fi

demo: deps build
	$(BIN)/sqmkit-lab demo

# The unit and browser tests HARSH_COUNT times on a loaded host
# (scripts/harsh.sh): the proof that none asserts on its scheduling.
HARSH_COUNT ?= 5
harsh: deps build
	GO=$(GO) scripts/harsh.sh $(HARSH_COUNT)

bench: deps build
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./...
	VERSION=$(VERSION) scripts/size.sh

# The binary the OpenWrt package installs (build tag router, GO_PKG_TAGS in
# openwrt/sqmkit/Makefile) for every router architecture, named as
# `sqmkit install` users fetch it (bin/release/sqmkit-ARCH, SHA256SUMS),
# checked against the size budget.
router size:
	VERSION=$(VERSION) scripts/size.sh

# go test -fuzz takes one target per run: each parser gets FUZZTIME.
FUZZTIME ?= 30s
FUZZ := internal/uci:FuzzParse internal/tcstats:FuzzParseQdiscs \
	internal/bbproto:FuzzProbe internal/bbproto:FuzzHello internal/bbproto:FuzzReadMsg \
	internal/bbproto:FuzzStreamHeader internal/bbproto:FuzzFrameHeader internal/rpm:FuzzParseConfig \
	internal/http1:FuzzResponse
fuzz:
	@set -e; for t in $(FUZZ); do \
		echo "fuzz $$t"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) ./$${t%%:*}; \
	done

cross:
	GOOS=linux GOARCH=amd64 $(GOBUILD) -o $(BIN)/sqmkit-linux-amd64 ./cmd/sqmkit
	GOOS=linux GOARCH=arm64 $(GOBUILD) -o $(BIN)/sqmkit-linux-arm64 ./cmd/sqmkit
	GOOS=linux GOARCH=arm GOARM=7 $(GOBUILD) -o $(BIN)/sqmkit-linux-armv7 ./cmd/sqmkit
	GOOS=linux GOARCH=mipsle GOMIPS=softfloat $(GOBUILD) -o $(BIN)/sqmkit-linux-mipsle ./cmd/sqmkit

clean:
	rm -rf $(BIN) lab/results
