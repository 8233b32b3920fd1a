# uroce: a user-space RoCEv2 NIC.
#   make demo   install what is missing, build, run the two-process demo
#   make test   install what is missing, build, run all tests (release, then ASan+UBSan, then the
#               fuzzer, then interop with Linux Soft-RoCE in a qemu guest): every stage runs, the
#               summary says how each went, and make fails at the end if one failed
#   make build  build only (release, into build/)
#   make bench  run the benchmarks (results in bench/results/)
#   make study  the lossy-fabric study: simulator and real engine (docs/study.md)

JOBS       ?= $(shell nproc)
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
# The ASan run repeats the whole suite with a smaller protocol stress load.
ASAN_PROTO_MESSAGES ?= 2000

# One stage at a time: each stage already uses every core, and interop boots a guest.
.NOTPARALLEL:

.PHONY: all deps build build-asan build-fuzz demo test test-summary test-release test-asan fuzz bench study interop clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DUROCE_SANITIZE=ON -DUROCE_BENCH=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory

build-fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DUROCE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) -- --no-print-directory

demo: build
	@$(BUILD)/bin/uroce-demo

# Every stage runs, whatever the one before it did; the summary names each stage's result, and
# make fails at the end if any stage failed.
STAGES = test-release test-asan fuzz interop

test: deps
	@rm -f $(BUILD)/stages.log $(BUILD)/ctest.log $(ASAN_BUILD)/ctest.log $(BUILD)/interop.log; mkdir -p $(BUILD); \
	for s in $(STAGES); do \
	  if $(MAKE) --no-print-directory $$s; then echo "$$s passed" >> $(BUILD)/stages.log; \
	  else echo "$$s FAILED" >> $(BUILD)/stages.log; fi; done; \
	$(MAKE) --no-print-directory test-summary; ! grep -q FAILED $(BUILD)/stages.log

test-summary:
	@p=0; f=0; skipped=""; for log in $(BUILD)/ctest.log $(ASAN_BUILD)/ctest.log; do \
	  [ -f $$log ] || continue; \
	  t=$$(sed -n 's/.* tests passed, \([0-9]*\) tests failed out of \([0-9]*\)/\1 \2/p' $$log | tail -1); \
	  [ -n "$$t" ] || continue; \
	  s=$$(grep -c '(Skipped)' $$log); skipped="$$skipped$$(sed -n 's/.* - \(.*\) (Skipped)/ \1/p' $$log)"; \
	  set -- $$t; f=$$((f + $$1)); p=$$((p + $$2 - $$1 - s)); done; \
	t=$$(sed -n 's/^interop: \([0-9]*\) passed, \([0-9]*\) failed$$/\1 \2/p' $(BUILD)/interop.log 2>/dev/null | tail -1); \
	if [ -n "$$t" ]; then set -- $$t; p=$$((p + $$1)); f=$$((f + $$2)); what=" + rxe interop"; \
	else why=$$(sed -n 's/^## INTEROP SUITE NOT RUN: //p' $(BUILD)/interop.log 2>/dev/null); \
	  what="; INTEROP NOT RUN: $${why:-its stage did not finish}"; fi; \
	[ -n "$$skipped" ] && what="$$what; SKIPPED:$$skipped (see their banners)"; \
	for b in $(BUILD) $(ASAN_BUILD); do sh tests/failed_output.sh $$b; done; \
	echo "== stages: $$(tr '\n' ';' < $(BUILD)/stages.log | sed 's/;$$//; s/;/, /g')"; \
	echo "make test (release + ASan/UBSan + fuzz$$what): $$p passed, $$f failed"

test-release: build
	@echo "== tests (release) =="
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) > ctest.log 2>&1; rc=$$?; cat ctest.log; exit $$rc

test-asan: build-asan
	@echo "== tests (ASan + UBSan) =="
	@cd $(ASAN_BUILD) && UROCE_PROTO_MESSAGES=$(ASAN_PROTO_MESSAGES) \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) > ctest.log 2>&1; rc=$$?; cat ctest.log; exit $$rc

fuzz: build-fuzz
	@echo "== fuzz: random packets into a connected responder/requester pair, $(FUZZ_SECONDS) s =="
	@mkdir -p $(FUZZ_BUILD)/corpus
	@$(FUZZ_BUILD)/bin/fuzz_packets -max_total_time=$(FUZZ_SECONDS) -seed=1 -print_final_stats=1 \
	  $(FUZZ_BUILD)/corpus fuzz/seeds > $(FUZZ_BUILD)/fuzz.log 2>&1; rc=$$?; \
	  tail -n 8 $(FUZZ_BUILD)/fuzz.log; \
	  if [ $$rc -ne 0 ]; then echo "fuzzer failed (exit $$rc), see $(FUZZ_BUILD)/fuzz.log"; exit 1; fi; \
	  echo "fuzz: no crash, leak or canary hit"

# uroce <-> Linux Soft-RoCE in a qemu guest (root; boots ../shared/rxe-peer, installs qemu and the
# guest's packages). Without root, tun or a bootable guest it says so loudly and passes.
interop: build
	@echo "== interop: uroce <-> Linux Soft-RoCE (rxe) in a qemu guest =="
	@{ bash tests/interop/rxe_interop.sh $(BUILD) 2>&1; echo $$? > $(BUILD)/interop.rc; } | tee $(BUILD)/interop.log; \
	  exit $$(cat $(BUILD)/interop.rc)

bench: build
	@sh scripts/install-deps.sh bench
	@sh bench/run.sh $(BUILD)

# The lossy-fabric study: simulator and real engine, gbn against sr, incast; docs/study.md.
study: build
	@sh scripts/install-deps.sh study
	@python3 bench/study.py $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
