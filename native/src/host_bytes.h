// Host memory for sequences the prefix cache's host tier keeps (seqStateGet): megabytes each (~5 KB a
// token on the tiny model). Copying a sequence into fresh pages cost far more than the copy: on a
// 2-core VM every page's first touch took ~13 µs, so saving 2,600 tokens took ~45 ms of the event
// loop's thread, against ~4 ms into pages already touched (docs/per-token.md §12).
//
// So the memory is kept warm: a Buffer seqStateGet returns is its own private mapping; when the
// Buffer is collected (the tier dropped the entry) the mapping goes back to a warm set instead of to
// the kernel, and when the engine is idle one mapping as large as the largest save so far is
// mapped and touched on a libuv pool thread (prefill), so the next save copies into warm pages.
// The warm set is bounded (kWarmCap bytes, but one mapping is always kept); past it, returned
// mappings are unmapped.
//
// Invariants: the warm set and its counters are touched on the JS thread only (take, wrap's
// finalizer, a fill's OnOK); a fill's pool thread touches only the mapping it made, which nothing
// else sees until OnOK. The set is process-wide (a Buffer may outlive the context that filled it).
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>

namespace hostbytes {

// A private anonymous mapping of `length` bytes.
struct Mapping {
  void* base = nullptr;
  size_t length = 0;
};

constexpr size_t kWarmCap = size_t{128} << 20;

// The smallest warm mapping of at least `size` bytes, else a fresh one; nullptr when mmap fails.
Mapping* take(size_t size);
// A Buffer over the mapping's first `used` bytes; once collected, the mapping returns to the warm set.
Napi::Buffer<uint8_t> wrap(Napi::Env env, Mapping* m, size_t used);
// Back to the warm set; unmapped if that would take the set past kWarmCap, unless the set is empty
// (one mapping is always kept, however large: on a big model one saved sequence exceeds the cap).
void release(Mapping* m);
// Starts mapping and touching `size` bytes on a libuv pool thread, unless a fill is in flight or
// a warm mapping of at least `size` bytes exists. Whether one started.
bool prefill(Napi::Env env, size_t size);

struct Stats {
  size_t numWarm = 0;
  size_t warmBytes = 0;
  size_t numFills = 0;      // fills finished
  size_t numWarmTakes = 0;  // saves into warm memory
  size_t numColdTakes = 0;  // saves into fresh memory
};
Stats stats();

}  // namespace hostbytes
