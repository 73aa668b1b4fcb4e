// HeadroomLlama: one llama.cpp model + one context with a unified KV pool, wrapped for JS.
//
// Invariants:
// - At most one decode is in flight (`busy_`); while it runs, every method that touches the
//   context or the samplers throws (the JS runner serialises steps, so a throw here is a bug).
//   decodeSync runs a step on the calling (JS) thread, so nothing else can run meanwhile.
// - Sampling is native and per sequence: `samplers_[seq]` is a llama_sampler chain created by
//   setSampler (greedy when temperature == 0) and reset only by another setSampler. The chain's
//   order is fixed (see SetSampler); the history a fresh chain needs (prompt tokens for the
//   repetition penalty, earlier output tokens for the grammar and the other penalties) is accepted
//   into the individual samplers before they join the chain, so the grammar never sees the prompt.
// - `logprobsK_[seq]` is -1 (no log-probabilities) or the number of alternatives (0..20) the
//   decode worker reports for every token sampled on that sequence, computed from the raw logits.
// - llama_decode's refusals (1 = no KV slot, 2 = aborted, -1 = invalid batch, < -1 = fatal) come
//   back as a status code in the resolved value; the promise rejects only on a bug.
// - llama_decode runs on one persistent ggml thread pool made at construction (`threadpool_`),
//   not the pool llama.cpp otherwise creates and joins for every graph: with the prebuilt
//   libraries (no OpenMP) that per-graph pool cost a 2-thread batch-1 decode 13 ms instead of
//   1.3 ms (bench/native/batched-bench.ts, docs/per-token.md). `threadPool: false` restores it.
// - Tokenization may run on pool threads while a decode is in flight (it reads only the
//   vocabulary and the immutable FastTokenizer); close() refuses while any is running.
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "chat_templates.h"
#include "decode_worker.h"
#include "fast_tokenizer.h"
#include "llama.h"

#include <sched.h>

class HeadroomLlama : public Napi::ObjectWrap<HeadroomLlama> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit HeadroomLlama(const Napi::CallbackInfo& info);
  ~HeadroomLlama() override;

  // Used by DecodeStep::Run (on a libuv pool thread, or the JS thread for decodeSync).
  llama_context* ctx() const { return ctx_; }
  llama_batch& batch() { return batch_; }
  llama_sampler* samplerFor(int32_t seq);
  int32_t logprobsFor(int32_t seq) const { return logprobsK_[static_cast<size_t>(seq)]; }
  const llama_vocab* vocab() const { return vocab_; }
  // With pinned threads: the calling thread of a decode runs on the CPU left to it, then gets the
  // process's CPUs back (no-ops otherwise).
  void pinCaller() const;
  void unpinCaller() const;
  void setBusy(bool busy) { busy_ = busy; }
  // Used by TokenizeWorker.
  void endTokenize() { numTokenizing_--; }

 private:
  Napi::Value Decode(const Napi::CallbackInfo& info);
  Napi::Value DecodeSync(const Napi::CallbackInfo& info);
  DecodeStep decodeRows(const Napi::CallbackInfo& info, const char* what);
  Napi::Value SetSampler(const Napi::CallbackInfo& info);
  Napi::Value CheckGrammar(const Napi::CallbackInfo& info);
  Napi::Value SeqCopy(const Napi::CallbackInfo& info);
  Napi::Value SeqRemove(const Napi::CallbackInfo& info);
  Napi::Value SeqPosMax(const Napi::CallbackInfo& info);
  Napi::Value SeqStateGet(const Napi::CallbackInfo& info);
  Napi::Value SeqStateSet(const Napi::CallbackInfo& info);
  Napi::Value MemoryClear(const Napi::CallbackInfo& info);
  Napi::Value PauseThreads(const Napi::CallbackInfo& info);
  Napi::Value PrepareHostBytes(const Napi::CallbackInfo& info);
  Napi::Value HostBytesStats(const Napi::CallbackInfo& info);
  Napi::Value Tokenize(const Napi::CallbackInfo& info);
  Napi::Value TokenizeAsync(const Napi::CallbackInfo& info);
  Napi::Value ChatTokenizeAsync(const Napi::CallbackInfo& info);
  Napi::Value TokenPiece(const Napi::CallbackInfo& info);
  Napi::Value IsEog(const Napi::CallbackInfo& info);
  Napi::Value ChatInit(const Napi::CallbackInfo& info);
  Napi::Value ChatRender(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  bool planPinning(ggml_threadpool_params& tpp);
  void checkUsable(Napi::Env env, const char* what) const;
  void checkSeq(Napi::Env env, int32_t seq) const;
  void freeAll();

  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  llama_batch batch_{};
  bool batchAllocated_ = false;
  std::vector<llama_sampler*> samplers_;
  std::vector<int32_t> logprobsK_;
  uint32_t nBatch_ = 0;
  uint32_t nSeqMax_ = 0;
  int32_t threads_ = 0;
  int32_t threadsBatch_ = 0;
  // The persistent ggml thread pool llama_decode runs on (null: llama.cpp's per-call pool), and
  // how it polls for work between graphs (0 = sleep at once, 100 = spin hardest).
  ggml_threadpool* threadpool_ = nullptr;
  void (*threadpoolFree_)(ggml_threadpool*) = nullptr;
  // ggml_threadpool_pause: the pool's threads stop polling and sleep until the next graph, which
  // resumes them (ggml's kickoff does). Null when the backend does not export it.
  void (*threadpoolPause_)(ggml_threadpool*) = nullptr;
  int32_t threadpoolPoll_ = -1;
  // pinThreads: each pool thread owns one CPU, the decode's calling thread another (callerCpus_);
  // allCpus_ is the process's set, given back to the caller after each decode.
  bool pinned_ = false;
  cpu_set_t callerCpus_{};
  cpu_set_t allCpus_{};
  bool busy_ = false;
  std::unique_ptr<FastTokenizer> tokenizer_;
  std::unique_ptr<ChatTemplates> chat_;
  std::string loadLog_;  // llama.cpp's warnings while loading the model  // set by chatInit; read by TokenizeWorkers (immutable)
  int32_t numTokenizing_ = 0;
};
