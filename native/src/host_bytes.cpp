#include "host_bytes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace hostbytes {
namespace {

constexpr size_t kRound = size_t{1} << 20;  // sizes rounded up to 1 MiB, so nearby sizes share mappings

std::vector<Mapping*> g_warm;
size_t g_warmBytes = 0;
bool g_filling = false;
Stats g_stats;

Mapping* mapFresh(size_t size) {
  const size_t length = (std::max<size_t>(size, 1) + kRound - 1) / kRound * kRound;
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  auto* m = new Mapping();
  m->base = base;
  m->length = length;
  return m;
}

void unmap(Mapping* m) {
  munmap(m->base, m->length);
  delete m;
}

bool haveWarm(size_t size) {
  return std::any_of(g_warm.begin(), g_warm.end(), [size](const Mapping* m) { return m->length >= size; });
}

// Maps and touches one mapping off the JS thread; hands it to the warm set on the JS thread.
class FillWorker : public Napi::AsyncWorker {
 public:
  FillWorker(Napi::Env env, size_t size) : Napi::AsyncWorker(env), size_(size) {}

 protected:
  void Execute() override {
    mapping_ = mapFresh(size_);
    if (mapping_ == nullptr) {
      SetError("mmap failed");
      return;
    }
    // A write to each page makes the kernel back it now rather than during a save.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    auto* p = static_cast<volatile uint8_t*>(mapping_->base);
    for (size_t off = 0; off < mapping_->length; off += page) p[off] = 0;
  }
  void OnOK() override {
    g_filling = false;
    g_stats.numFills++;
    release(mapping_);
  }
  void OnError(const Napi::Error&) override { g_filling = false; }

 private:
  size_t size_;
  Mapping* mapping_ = nullptr;
};

}  // namespace

Mapping* take(size_t size) {
  auto best = g_warm.end();
  for (auto it = g_warm.begin(); it != g_warm.end(); ++it) {
    if ((*it)->length >= size && (best == g_warm.end() || (*it)->length < (*best)->length)) best = it;
  }
  if (best != g_warm.end()) {
    Mapping* m = *best;
    g_warm.erase(best);
    g_warmBytes -= m->length;
    g_stats.numWarmTakes++;
    return m;
  }
  Mapping* m = mapFresh(size);
  if (m != nullptr) g_stats.numColdTakes++;
  return m;
}

void release(Mapping* m) {
  if (!g_warm.empty() && g_warmBytes + m->length > kWarmCap) {
    unmap(m);
    return;
  }
  g_warm.push_back(m);
  g_warmBytes += m->length;
}

Napi::Buffer<uint8_t> wrap(Napi::Env env, Mapping* m, size_t used) {
  Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(m->length));
  return Napi::Buffer<uint8_t>::New(
      env, static_cast<uint8_t*>(m->base), used,
      [](Napi::Env e, uint8_t*, Mapping* mapping) {
        Napi::MemoryManagement::AdjustExternalMemory(e, -static_cast<int64_t>(mapping->length));
        release(mapping);
      },
      m);
}

bool prefill(Napi::Env env, size_t size) {
  if (g_filling || size == 0 || haveWarm(size)) return false;
  g_filling = true;
  (new FillWorker(env, size))->Queue();
  return true;
}

Stats stats() {
  Stats s = g_stats;
  s.numWarm = g_warm.size();
  s.warmBytes = g_warmBytes;
  return s;
}

}  // namespace hostbytes
