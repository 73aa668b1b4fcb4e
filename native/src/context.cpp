#include "context.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "decode_worker.h"
#include "host_bytes.h"
#include "tokenize_worker.h"
#include "log.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

namespace {

bool gVerbose = false;
bool gBackendsLoaded = false;
ggml_log_level gLastLevel = GGML_LOG_LEVEL_INFO;

// While a model loads, what llama.cpp logs is held here instead of printed: a failed load then
// becomes one error message (its last error line) rather than a screenful; a good one prints it.
std::string* gCapture = nullptr;

// llama.cpp logs a lot at load time; keep warnings and errors unless HEADROOM_LLAMA_LOG asks for all.
void logCallback(ggml_log_level level, const char* text, void*) {
  if (level != GGML_LOG_LEVEL_CONT) gLastLevel = level;
  if (!gVerbose && gLastLevel < GGML_LOG_LEVEL_WARN) return;
  if (gCapture != nullptr) *gCapture += text;
  else fputs(text, stderr);
}

// The last line of captured load logs that says something (llama.cpp's reason for a failure).
std::string lastLine(const std::string& log) {
  size_t end = log.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return "";
  size_t start = log.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return log.substr(start, end - start + 1);
}

// llama.cpp's reason for a failed load: the first line that says what went wrong (the cause comes
// before the "error loading model" / "failed to load model" lines that follow from it), else the last.
std::string reasonLine(const std::string& log) {
  static const char* words[] = {"error", "fail", "invalid", "unknown", "unsupported", "not within", "mismatch", "corrupt"};
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    for (const char* w : words)
      if (lower.find(w) != std::string::npos) return line;
    start = end + 1;
  }
  return lastLine(log);
}

int32_t intOpt(const Napi::Object& o, const char* key, int32_t dflt) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return dflt;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("option ") + key + ": expected a number");
  return v.As<Napi::Number>().Int32Value();
}

std::string strOpt(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string("option ") + key + ": expected a string");
  return v.As<Napi::String>().Utf8Value();
}

}  // namespace

Napi::Function HeadroomLlama::Init(Napi::Env env) {
  return DefineClass(env, "HeadroomLlama",
                     {
                         InstanceMethod<&HeadroomLlama::Decode>("decode"),
                         InstanceMethod<&HeadroomLlama::DecodeSync>("decodeSync"),
                         InstanceMethod<&HeadroomLlama::SetSampler>("setSampler"),
                         InstanceMethod<&HeadroomLlama::CheckGrammar>("checkGrammar"),
                         InstanceMethod<&HeadroomLlama::SeqCopy>("seqCopy"),
                         InstanceMethod<&HeadroomLlama::SeqRemove>("seqRemove"),
                         InstanceMethod<&HeadroomLlama::SeqPosMax>("seqPosMax"),
                         InstanceMethod<&HeadroomLlama::SeqStateGet>("seqStateGet"),
                         InstanceMethod<&HeadroomLlama::SeqStateSet>("seqStateSet"),
                         InstanceMethod<&HeadroomLlama::MemoryClear>("memoryClear"),
                         InstanceMethod<&HeadroomLlama::PauseThreads>("pauseThreads"),
                         InstanceMethod<&HeadroomLlama::PrepareHostBytes>("prepareHostBytes"),
                         InstanceMethod<&HeadroomLlama::HostBytesStats>("hostBytesStats"),
                         InstanceMethod<&HeadroomLlama::Tokenize>("tokenize"),
                         InstanceMethod<&HeadroomLlama::TokenizeAsync>("tokenizeAsync"),
                         InstanceMethod<&HeadroomLlama::ChatTokenizeAsync>("chatTokenizeAsync"),
                         InstanceMethod<&HeadroomLlama::TokenPiece>("tokenPiece"),
                         InstanceMethod<&HeadroomLlama::IsEog>("isEog"),
                         InstanceMethod<&HeadroomLlama::ChatInit>("chatInit"),
                         InstanceMethod<&HeadroomLlama::ChatRender>("chatRender"),
                         InstanceMethod<&HeadroomLlama::Info>("info"),
                         InstanceMethod<&HeadroomLlama::Close>("close"),
                     });
}

HeadroomLlama::HeadroomLlama(const Napi::CallbackInfo& info) : Napi::ObjectWrap<HeadroomLlama>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "expected an options object");
  const Napi::Object o = info[0].As<Napi::Object>();
  const std::string modelPath = strOpt(o, "modelPath");
  const std::string binsDir = strOpt(o, "binsDir");
  gVerbose = o.Get("verbose").ToBoolean().Value();
  threads_ = intOpt(o, "threads", 0);
  threadsBatch_ = intOpt(o, "threadsBatch", threads_);
  if (threads_ < 1 || threadsBatch_ < 1) throw Napi::RangeError::New(env, "threads: expected an explicit count >= 1");

  llama_log_set(logCallback, nullptr);
  if (!gBackendsLoaded) {
    // The prebuilt libraries load their CPU backend at run time: one of the libggml-cpu-<level>.so
    // variants in the bins folder (without this, "no backends are loaded"). A libggml built from
    // source (scripts/build-llama.mjs) has it built in; loading a variant too would add a second CPU device.
    if (ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU) == nullptr) ggml_backend_load_all_from_path(binsDir.c_str());
    gBackendsLoaded = true;
  }

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  std::string loadLog;
  gCapture = &loadLog;
  model_ = llama_model_load_from_file(modelPath.c_str(), mp);
  gCapture = nullptr;
  if (model_ == nullptr) {
    const std::string why = reasonLine(loadLog);
    throw Napi::Error::New(env, "llama.cpp could not load the model at " + modelPath + (why.empty() ? "" : " (" + why + ")"));
  }
  loadLog_ = loadLog;  // its warnings reach the server's log through JS (info().loadLog), not raw stderr
  vocab_ = llama_model_get_vocab(model_);
  tokenizer_ = std::make_unique<FastTokenizer>(vocab_);

  llama_context_params cp = llama_context_default_params();
  // nCtx 0: the model's trained context, capped at nCtxMax (a 32k-context GGUF need not reserve 32k cells).
  int32_t nCtx = intOpt(o, "nCtx", 0);
  if (nCtx <= 0) {
    const int32_t cap = intOpt(o, "nCtxMax", 8192);
    nCtx = llama_model_n_ctx_train(model_);
    if (nCtx <= 0 || nCtx > cap) nCtx = cap;
  }
  // A context past the trained one is refused before any KV is allocated, unless asked for.
  const int32_t nCtxTrain = llama_model_n_ctx_train(model_);
  if (nCtxTrain > 0 && nCtx > nCtxTrain && !o.Get("allowBeyondTrained").ToBoolean().Value()) {
    // The GGUF key is the architecture's own: qwen2.context_length, gemma4.context_length, ...
    char arch[64] = "llama";
    llama_model_meta_val_str(model_, "general.architecture", arch, sizeof(arch));
    const std::string key = std::string(arch) + ".context_length";
    freeAll();
    Napi::Error e = Napi::Error::New(env, "a context of " + std::to_string(nCtx) + " tokens is longer than the model's trained context of " +
                                              std::to_string(nCtxTrain) + " (GGUF " + key + ")");
    e.Set("code", Napi::String::New(env, "context_beyond_trained"));
    e.Set("trainedTokens", Napi::Number::New(env, nCtxTrain));
    e.Set("trainedKey", Napi::String::New(env, key));
    throw e;
  }
  cp.n_ctx = static_cast<uint32_t>(nCtx);
  cp.n_seq_max = static_cast<uint32_t>(intOpt(o, "nSeqMax", 16));
  cp.n_batch = static_cast<uint32_t>(intOpt(o, "nBatch", 512));
  cp.n_ubatch = static_cast<uint32_t>(intOpt(o, "nUbatch", static_cast<int32_t>(cp.n_batch)));
  cp.n_threads = threads_;
  cp.n_threads_batch = threadsBatch_;
  cp.kv_unified = true;  // one pool of n_ctx cells shared by all sequences: seq_cp only tags cells
  cp.no_perf = true;
  ctx_ = llama_init_from_model(model_, cp);
  if (ctx_ == nullptr) {
    freeAll();
    throw Napi::Error::New(env, "llama.cpp could not create a context (n_ctx, n_seq_max or n_batch out of range?)");
  }
  // A persistent thread pool for llama_decode. The CPU backend is a run-time-loaded library, so
  // its thread-pool functions are looked up through the backend registry, as llama.cpp's tools do.
  if (o.Get("threadPool").IsUndefined() || o.Get("threadPool").ToBoolean().Value()) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = cpu != nullptr ? ggml_backend_dev_backend_reg(cpu) : nullptr;
    auto* newFn = reg != nullptr ? reinterpret_cast<decltype(ggml_threadpool_new)*>(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new")) : nullptr;
    auto* freeFn = reg != nullptr ? reinterpret_cast<decltype(ggml_threadpool_free)*>(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free")) : nullptr;
    // The registry does not hand out ggml_threadpool_pause; the library that holds
    // ggml_threadpool_new exports it, so it is looked up there (absent: the pool is never paused).
    decltype(ggml_threadpool_pause)* pauseFn = nullptr;
    Dl_info where{};
    if (newFn != nullptr && dladdr(reinterpret_cast<void*>(newFn), &where) != 0 && where.dli_fname != nullptr) {
      void* lib = dlopen(where.dli_fname, RTLD_NOW | RTLD_NOLOAD);
      if (lib != nullptr) {
        pauseFn = reinterpret_cast<decltype(ggml_threadpool_pause)*>(dlsym(lib, "ggml_threadpool_pause"));
        dlclose(lib);  // drops the reference RTLD_NOLOAD took; the backend keeps the library loaded
      }
    }
    if (newFn != nullptr && freeFn != nullptr) {
      ggml_threadpool_params tpp = ggml_threadpool_params_default(std::max(threads_, threadsBatch_));
      const int32_t poll = intOpt(o, "threadPoll", -1);
      if (poll >= 0) tpp.poll = static_cast<uint32_t>(std::min(poll, 100));
      threadpoolPoll_ = static_cast<int32_t>(tpp.poll);
      if (o.Get("pinThreads").ToBoolean().Value()) pinned_ = planPinning(tpp);
      threadpool_ = newFn(&tpp);
      // ggml pinned the creating (JS) thread as worker 0; it gets the process's CPUs back.
      if (pinned_) sched_setaffinity(0, sizeof(allCpus_), &allCpus_);
      threadpoolFree_ = freeFn;
      threadpoolPause_ = pauseFn;
      if (threadpool_ != nullptr) llama_attach_threadpool(ctx_, threadpool_, nullptr);
    }
  }
  nBatch_ = llama_n_batch(ctx_);
  nSeqMax_ = llama_n_seq_max(ctx_);
  batch_ = llama_batch_init(static_cast<int32_t>(nBatch_), 0, 1);
  batchAllocated_ = true;
  samplers_.assign(nSeqMax_, nullptr);
  logprobsK_.assign(nSeqMax_, -1);
}

HeadroomLlama::~HeadroomLlama() { freeAll(); }

void HeadroomLlama::freeAll() {
  for (auto*& s : samplers_) {
    if (s != nullptr) llama_sampler_free(s);
    s = nullptr;
  }
  if (batchAllocated_) llama_batch_free(batch_);
  batchAllocated_ = false;
  if (ctx_ != nullptr) llama_free(ctx_);
  ctx_ = nullptr;
  if (threadpool_ != nullptr) threadpoolFree_(threadpool_);
  threadpool_ = nullptr;
  if (model_ != nullptr) llama_model_free(model_);
  model_ = nullptr;
  vocab_ = nullptr;
  chat_.reset();
  tokenizer_.reset();
}

// Pinning: with n threads and at least n CPUs allowed, pool threads 1..n-1 are each bound to one of
// the first n-1 CPUs (ggml's strict placement) and the decode's caller, worker 0, to the n-th. Two
// spinning threads then never share a CPU while another idles, which the kernel otherwise allowed.
bool HeadroomLlama::planPinning(ggml_threadpool_params& tpp) {
  if (sched_getaffinity(0, sizeof(allCpus_), &allCpus_) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && c < GGML_MAX_N_THREADS; c++)
    if (CPU_ISSET(c, &allCpus_)) cpus.push_back(c);
  const int n = tpp.n_threads;
  if (n < 2 || static_cast<size_t>(n) > cpus.size()) return false;
  for (int j = 0; j < n; j++) tpp.cpumask[cpus[static_cast<size_t>(j)]] = true;
  tpp.strict_cpu = true;
  CPU_ZERO(&callerCpus_);
  CPU_SET(cpus[static_cast<size_t>(n - 1)], &callerCpus_);
  return true;
}

void HeadroomLlama::pinCaller() const {
  if (pinned_) sched_setaffinity(0, sizeof(callerCpus_), &callerCpus_);
}

void HeadroomLlama::unpinCaller() const {
  if (pinned_) sched_setaffinity(0, sizeof(allCpus_), &allCpus_);
}

void HeadroomLlama::checkUsable(Napi::Env env, const char* what) const {
  if (ctx_ == nullptr) throw Napi::Error::New(env, std::string(what) + ": the context is closed");
  if (busy_) throw Napi::Error::New(env, std::string(what) + ": a decode is in flight (bug: steps must not overlap)");
}

void HeadroomLlama::checkSeq(Napi::Env env, int32_t seq) const {
  if (seq < 0 || static_cast<uint32_t>(seq) >= nSeqMax_)
    throw Napi::RangeError::New(env, "seq id " + std::to_string(seq) + " out of range [0, " + std::to_string(nSeqMax_) + ")");
}

llama_sampler* HeadroomLlama::samplerFor(int32_t seq) {
  llama_sampler*& s = samplers_[static_cast<size_t>(seq)];
  if (s == nullptr) {
    s = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(s, llama_sampler_init_greedy());
  }
  return s;
}

// The rows of a decode call, checked: (tokens: Int32Array, pos: Int32Array, seq: Int32Array, sample: Uint8Array,
// segmentEnds?: Int32Array, increasing row indices ending at the row count: one llama_decode each).
DecodeStep HeadroomLlama::decodeRows(const Napi::CallbackInfo& info, const char* what) {
  Napi::Env env = info.Env();
  checkUsable(env, what);
  if (info.Length() < 4 || !info[0].IsTypedArray() || !info[1].IsTypedArray() || !info[2].IsTypedArray() ||
      !info[3].IsTypedArray())
    throw Napi::TypeError::New(env, std::string(what) + ": expected (Int32Array tokens, Int32Array pos, Int32Array seq, Uint8Array sample)");
  const Napi::Int32Array tok = info[0].As<Napi::Int32Array>();
  const Napi::Int32Array pos = info[1].As<Napi::Int32Array>();
  const Napi::Int32Array seq = info[2].As<Napi::Int32Array>();
  const Napi::Uint8Array smp = info[3].As<Napi::Uint8Array>();
  const size_t n = tok.ElementLength();
  if (pos.ElementLength() != n || seq.ElementLength() != n || smp.ElementLength() != n)
    throw Napi::RangeError::New(env, std::string(what) + ": the four row arrays must have the same length");
  if (n == 0 || n > nBatch_)
    throw Napi::RangeError::New(env, std::string(what) + ": expected 1.." + std::to_string(nBatch_) + " rows, got " + std::to_string(n));
  const int32_t nVocab = llama_vocab_n_tokens(vocab_);
  for (size_t i = 0; i < n; i++) {
    checkSeq(env, seq[i]);
    if (tok[i] < 0 || tok[i] >= nVocab) throw Napi::RangeError::New(env, std::string(what) + ": token id " + std::to_string(tok[i]) + " out of range");
  }
  DecodeStep step;
  step.tokens.assign(tok.Data(), tok.Data() + n);
  step.pos.assign(pos.Data(), pos.Data() + n);
  step.seq.assign(seq.Data(), seq.Data() + n);
  step.sample.assign(smp.Data(), smp.Data() + n);
  if (info.Length() >= 5 && !info[4].IsUndefined() && !info[4].IsNull()) {
    if (!info[4].IsTypedArray() || info[4].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
      throw Napi::TypeError::New(env, std::string(what) + ": segmentEnds: expected an Int32Array");
    const Napi::Int32Array ends = info[4].As<Napi::Int32Array>();
    int32_t last = 0;
    for (size_t k = 0; k < ends.ElementLength(); k++) {
      if (ends[k] <= last || static_cast<size_t>(ends[k]) > n)
        throw Napi::RangeError::New(env, std::string(what) + ": segmentEnds must increase within 1.." + std::to_string(n));
      last = ends[k];
    }
    if (ends.ElementLength() > 0 && static_cast<size_t>(last) != n)
      throw Napi::RangeError::New(env, std::string(what) + ": segmentEnds must end at the row count " + std::to_string(n));
    step.segmentEnds.assign(ends.Data(), ends.Data() + ends.ElementLength());
  }
  return step;
}

// decode(tokens, pos, seq, sample, segmentEnds?) -> Promise<DecodeResult>: the step runs on a libuv pool thread.
Napi::Value HeadroomLlama::Decode(const Napi::CallbackInfo& info) {
  DecodeStep step = decodeRows(info, "decode");
  auto* w = new DecodeWorker(info.Env(), this, Napi::Persistent(Value()), std::move(step));
  Napi::Promise p = w->Promise();
  busy_ = true;
  w->Queue();
  return p;
}

// decodeSync(tokens, pos, seq, sample, segmentEnds?) -> DecodeResult: the step runs here, on the JS thread, which
// it blocks until done; ggml's pool threads join it as for any other caller.
Napi::Value HeadroomLlama::DecodeSync(const Napi::CallbackInfo& info) {
  DecodeStep step = decodeRows(info, "decodeSync");
  busy_ = true;
  try {
    step.Run(this);
  } catch (...) {
    busy_ = false;
    throw;
  }
  busy_ = false;
  return step.ToJs(info.Env());
}

namespace {

double numOpt(const Napi::Object& o, const char* key, double dflt) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return dflt;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("sampler option ") + key + ": expected a number");
  return v.As<Napi::Number>().DoubleValue();
}

std::vector<int32_t> int32sOpt(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return {};
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    throw Napi::TypeError::New(o.Env(), std::string("sampler option ") + key + ": expected an Int32Array");
  const Napi::Int32Array a = v.As<Napi::Int32Array>();
  return std::vector<int32_t>(a.Data(), a.Data() + a.ElementLength());
}

// The sampler `s` with `tokens` accepted (its history), or nullptr when it refuses one (a grammar
// that does not match earlier output: a bug upstream, reported as a failed setSampler).
llama_sampler* withHistory(llama_sampler* s, const int32_t* tokens, size_t n) {
  try {
    for (size_t i = 0; i < n; i++) llama_sampler_accept(s, tokens[i]);
  } catch (const std::exception&) {
    llama_sampler_free(s);
    return nullptr;
  }
  return s;
}

// The chat format's generation prompt, fed to a fresh grammar while the grammar allows each token.
// llama-server feeds all of it and fails when the grammar covers only its start (Gemma 4's with
// thinking off ends in an empty thought channel its tool grammar does not spell); here the grammar
// resumes after the part it covers, and the output then starts where the grammar expects it to.
llama_sampler* withPrefill(llama_sampler* g, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    llama_token_data one{t, 0.0f, 0.0f};
    llama_token_data_array cur{&one, 1, -1, false};
    llama_sampler_apply(g, &cur);
    if (!std::isfinite(one.logit)) break;
    try {
      llama_sampler_accept(g, t);
    } catch (const std::exception&) {
      llama_sampler_free(g);
      return nullptr;
    }
  }
  return g;
}

}  // namespace

// setSampler(seq, config) -> boolean: a fresh sampler chain for this sequence. config holds
// temperature, topP, topK, minP, seed, repetitionPenalty, frequencyPenalty, presencePenalty,
// logitBiasIds (Int32Array) + logitBiasValues (Float32Array), grammar (GBNF, '' = none), logprobs
// (-1 = off, else alternatives per token), history (Int32Array: the tokens before the first one
// this chain samples) and numPromptTokens (how many of them are prompt). The chain, in order:
//
//   logit bias → repetition penalty (prompt + output) → frequency/presence penalties (output only)
//   → grammar → greedy | top-k → top-p → min-p → temperature → seeded draw
//
// false: the grammar did not parse or did not accept the history (the API checks grammars first,
// so this is a bug); the sequence keeps a greedy chain.
Napi::Value HeadroomLlama::SetSampler(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "setSampler");
  if (info.Length() < 2 || !info[1].IsObject()) throw Napi::TypeError::New(env, "setSampler: expected (seq, config)");
  const int32_t seq = info[0].As<Napi::Number>().Int32Value();
  checkSeq(env, seq);
  const Napi::Object o = info[1].As<Napi::Object>();
  const double temperature = numOpt(o, "temperature", 0);
  const double topP = numOpt(o, "topP", 1);
  const int32_t topK = static_cast<int32_t>(numOpt(o, "topK", 0));
  const double minP = numOpt(o, "minP", 0);
  const uint32_t seed = static_cast<uint32_t>(numOpt(o, "seed", 0));
  const double repetition = numOpt(o, "repetitionPenalty", 1);
  const double frequency = numOpt(o, "frequencyPenalty", 0);
  const double presence = numOpt(o, "presencePenalty", 0);
  const int32_t logprobs = static_cast<int32_t>(numOpt(o, "logprobs", -1));
  const std::vector<int32_t> history = int32sOpt(o, "history");
  const size_t numPrompt = std::min(history.size(), static_cast<size_t>(std::max(0.0, numOpt(o, "numPromptTokens", 0))));
  const std::vector<int32_t> biasIds = int32sOpt(o, "logitBiasIds");
  std::vector<float> biasValues;
  const Napi::Value bv = o.Get("logitBiasValues");
  if (bv.IsTypedArray() && bv.As<Napi::TypedArray>().TypedArrayType() == napi_float32_array) {
    const Napi::Float32Array a = bv.As<Napi::Float32Array>();
    biasValues.assign(a.Data(), a.Data() + a.ElementLength());
  }
  if (biasValues.size() != biasIds.size()) throw Napi::RangeError::New(env, "setSampler: logitBiasIds and logitBiasValues differ in length");
  const Napi::Value gv = o.Get("grammar");
  const std::string grammar = gv.IsString() ? gv.As<Napi::String>().Utf8Value() : "";
  // A lazy grammar (tool calls with tool_choice auto) constrains nothing until a trigger: a token
  // in triggerTokens or text matching one of triggerPatterns (from its start). grammarPrefill: tokens
  // the grammar accepts before the output (the chat format's generation prompt).
  const bool lazy = o.Get("grammarLazy").ToBoolean().Value();
  std::vector<std::string> triggerPatterns;
  const Napi::Value tpv = o.Get("triggerPatterns");
  if (tpv.IsArray()) {
    const Napi::Array a = tpv.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) triggerPatterns.push_back(a.Get(i).As<Napi::String>().Utf8Value());
  }
  const std::vector<int32_t> triggerTokens = int32sOpt(o, "triggerTokens");
  const std::vector<int32_t> prefill = int32sOpt(o, "grammarPrefill");
  if (logprobs < -1 || logprobs > 20) throw Napi::RangeError::New(env, "setSampler: logprobs must be in -1..20");

  const int32_t nVocab = llama_vocab_n_tokens(vocab_);
  for (int32_t t : biasIds)
    if (t < 0 || t >= nVocab) throw Napi::RangeError::New(env, "setSampler: logit bias token " + std::to_string(t) + " out of range");
  for (const std::vector<int32_t>* v : {&history, &triggerTokens, &prefill})
    for (int32_t t : *v)
      if (t < 0 || t >= nVocab) throw Napi::RangeError::New(env, "setSampler: token " + std::to_string(t) + " out of range");

  llama_sampler*& s = samplers_[static_cast<size_t>(seq)];
  if (s != nullptr) llama_sampler_free(s);
  s = llama_sampler_chain_init(llama_sampler_chain_default_params());
  logprobsK_[static_cast<size_t>(seq)] = logprobs;
  const int32_t* output = history.data() + numPrompt;
  const size_t numOutput = history.size() - numPrompt;
  bool ok = true;
  if (!biasIds.empty()) {
    std::vector<llama_logit_bias> bias(biasIds.size());
    for (size_t i = 0; i < bias.size(); i++) bias[i] = {biasIds[i], biasValues[i]};
    llama_sampler_chain_add(s, llama_sampler_init_logit_bias(nVocab, static_cast<int32_t>(bias.size()), bias.data()));
  }
  const int32_t lastN = static_cast<int32_t>(llama_n_ctx(ctx_));
  if (repetition != 1.0) {
    llama_sampler* p = llama_sampler_init_penalties(nVocab, lastN, static_cast<float>(repetition), 0.0f, 0.0f);
    p = withHistory(p, history.data(), history.size());
    if (p == nullptr) ok = false;
    else llama_sampler_chain_add(s, p);
  }
  if (frequency != 0.0 || presence != 0.0) {
    llama_sampler* p = llama_sampler_init_penalties(nVocab, lastN, 1.0f, static_cast<float>(frequency), static_cast<float>(presence));
    p = withHistory(p, output, numOutput);
    if (p == nullptr) ok = false;
    else llama_sampler_chain_add(s, p);
  }
  if (ok && !grammar.empty()) {
    llama_sampler* g = nullptr;
    if (lazy) {
      std::vector<const char*> patterns;
      for (const std::string& p : triggerPatterns) patterns.push_back(p.c_str());
      g = llama_sampler_init_grammar_lazy_patterns(vocab_, grammar.c_str(), "root", patterns.data(), patterns.size(),
                                                   reinterpret_cast<const llama_token*>(triggerTokens.data()), triggerTokens.size());
    } else {
      g = llama_sampler_init_grammar(vocab_, grammar.c_str(), "root");
    }
    if (g != nullptr && !prefill.empty()) g = withPrefill(g, prefill);
    if (g != nullptr) g = withHistory(g, output, numOutput);
    if (g == nullptr) ok = false;
    else llama_sampler_chain_add(s, g);
  }
  if (!ok) {
    llama_sampler_free(s);
    s = llama_sampler_chain_init(llama_sampler_chain_default_params());
  }
  if (temperature <= 0 || !ok) {
    llama_sampler_chain_add(s, llama_sampler_init_greedy());
  } else {
    if (topK > 0) llama_sampler_chain_add(s, llama_sampler_init_top_k(topK));
    if (topP < 1.0) llama_sampler_chain_add(s, llama_sampler_init_top_p(static_cast<float>(topP), 1));
    if (minP > 0.0) llama_sampler_chain_add(s, llama_sampler_init_min_p(static_cast<float>(minP), 1));
    llama_sampler_chain_add(s, llama_sampler_init_temp(static_cast<float>(temperature)));
    llama_sampler_chain_add(s, llama_sampler_init_dist(seed));
  }
  return Napi::Boolean::New(env, ok);
}

// checkGrammar(gbnf) -> boolean: llama.cpp parses the grammar (root rule "root") against this
// vocabulary. On the calling thread; reads only the vocabulary, so it may run during a decode.
Napi::Value HeadroomLlama::CheckGrammar(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "checkGrammar: the context is closed");
  const std::string grammar = info[0].As<Napi::String>().Utf8Value();
  llama_sampler* g = nullptr;
  std::string parseLog;  // a refused grammar is the caller's 400, not a line on the server's stderr
  gCapture = &parseLog;
  try {
    g = llama_sampler_init_grammar(vocab_, grammar.c_str(), "root");
  } catch (const std::exception&) {
    g = nullptr;
  }
  gCapture = nullptr;
  if (g == nullptr) return Napi::Boolean::New(env, false);
  llama_sampler_free(g);
  return Napi::Boolean::New(env, true);
}

Napi::Value HeadroomLlama::SeqCopy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "seqCopy");
  const int32_t src = info[0].As<Napi::Number>().Int32Value();
  const int32_t dst = info[1].As<Napi::Number>().Int32Value();
  checkSeq(env, src);
  checkSeq(env, dst);
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, info[2].As<Napi::Number>().Int32Value(),
                      info[3].As<Napi::Number>().Int32Value());
  return env.Undefined();
}

Napi::Value HeadroomLlama::SeqRemove(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "seqRemove");
  const int32_t seq = info[0].As<Napi::Number>().Int32Value();
  checkSeq(env, seq);
  const bool ok = llama_memory_seq_rm(llama_get_memory(ctx_), seq, info[1].As<Napi::Number>().Int32Value(),
                                      info[2].As<Napi::Number>().Int32Value());
  return Napi::Boolean::New(env, ok);
}

Napi::Value HeadroomLlama::SeqPosMax(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "seqPosMax");
  const int32_t seq = info[0].As<Napi::Number>().Int32Value();
  checkSeq(env, seq);
  return Napi::Number::New(env, llama_memory_seq_pos_max(llama_get_memory(ctx_), seq));
}

// pauseThreads() -> bool: the engine has nothing to compute. Between graphs ggml's pool threads
// poll for the next one (at the default level 50, ~130 ms of a core after the last decode on this
// machine) before they sleep; paused, they sleep at once, and the next decode wakes them. False
// when there is no pool to pause. Never with a decode in flight.
Napi::Value HeadroomLlama::PauseThreads(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "pauseThreads");
  if (threadpool_ == nullptr || threadpoolPause_ == nullptr) return Napi::Boolean::New(env, false);
  threadpoolPause_(threadpool_);
  return Napi::Boolean::New(env, true);
}

// seqStateGet(seq) -> Buffer: the sequence's cells (positions, then K and V per layer) as
// llama_state_seq_get_data writes them, copied off the KV cache into host memory. On the calling
// thread, between decodes (the runner never calls it with a decode in flight).
Napi::Value HeadroomLlama::SeqStateGet(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "seqStateGet");
  const int32_t seq = info[0].As<Napi::Number>().Int32Value();
  checkSeq(env, seq);
  const size_t size = llama_state_seq_get_size(ctx_, seq);
  hostbytes::Mapping* m = hostbytes::take(size);
  if (m == nullptr) throw Napi::Error::New(env, "seqStateGet: could not map " + std::to_string(size) + " bytes of host memory");
  const size_t written = llama_state_seq_get_data(ctx_, static_cast<uint8_t*>(m->base), size, seq);
  if (written == 0 || written > size) {
    hostbytes::release(m);
    throw Napi::Error::New(env, "llama_state_seq_get_data wrote " + std::to_string(written) + " of " + std::to_string(size) + " bytes");
  }
  return hostbytes::wrap(env, m, written);
}

// prepareHostBytes(size) -> bool: when idle, make sure a warm mapping of `size` bytes waits for the
// next seqStateGet (host_bytes.h); false when one exists or a fill is already running.
Napi::Value HeadroomLlama::PrepareHostBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double size = info[0].As<Napi::Number>().DoubleValue();
  if (!(size >= 0 && size <= 1e12)) throw Napi::RangeError::New(env, "prepareHostBytes: expected a byte count");
  return Napi::Boolean::New(env, hostbytes::prefill(env, static_cast<size_t>(size)));
}

// hostBytesStats() -> { numWarm, warmBytes, numFills, numWarmTakes, numColdTakes } (process-wide).
Napi::Value HeadroomLlama::HostBytesStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const hostbytes::Stats s = hostbytes::stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("numWarm", Napi::Number::New(env, static_cast<double>(s.numWarm)));
  o.Set("warmBytes", Napi::Number::New(env, static_cast<double>(s.warmBytes)));
  o.Set("numFills", Napi::Number::New(env, static_cast<double>(s.numFills)));
  o.Set("numWarmTakes", Napi::Number::New(env, static_cast<double>(s.numWarmTakes)));
  o.Set("numColdTakes", Napi::Number::New(env, static_cast<double>(s.numColdTakes)));
  return o;
}

// seqStateSet(seq, bytes) -> boolean: the cells seqStateGet wrote, placed back into the cache as
// `seq`'s (its cells are cleared first), in whichever free cells llama.cpp finds. False when there
// are too few free cells, or the bytes do not fit this context (another model, another cache type).
Napi::Value HeadroomLlama::SeqStateSet(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "seqStateSet");
  const int32_t seq = info[0].As<Napi::Number>().Int32Value();
  checkSeq(env, seq);
  if (!info[1].IsBuffer()) throw Napi::TypeError::New(env, "seqStateSet: expected a Buffer");
  Napi::Buffer<uint8_t> buf = info[1].As<Napi::Buffer<uint8_t>>();
  const size_t read = llama_state_seq_set_data(ctx_, buf.Data(), buf.Length(), seq);
  return Napi::Boolean::New(env, read != 0);
}

Napi::Value HeadroomLlama::MemoryClear(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkUsable(env, "memoryClear");
  llama_memory_clear(llama_get_memory(ctx_), true);
  return env.Undefined();
}

// tokenize(text, addSpecial, parseSpecial, viaLlama?) -> Int32Array, on the calling thread (small
// texts: warm-up, tests). parseSpecial takes the linear FastTokenizer unless viaLlama asks for
// llama_tokenize itself (the reference the tests compare against).
// Vocab calls are thread-safe, so this may run while a decode is in flight.
Napi::Value HeadroomLlama::Tokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "tokenize: the context is closed");
  const std::string text = info[0].As<Napi::String>().Utf8Value();
  const bool addSpecial = info[1].ToBoolean().Value();
  const bool parseSpecial = info[2].ToBoolean().Value();
  const bool viaLlama = info.Length() > 3 && info[3].ToBoolean().Value();
  std::vector<llama_token> out;
  if (parseSpecial && !viaLlama) {
    out = tokenizer_->tokenize(text, addSpecial);
  } else {
    out.resize(text.size() + 8);
    int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), addSpecial, parseSpecial);
    if (n < 0) {
      out.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
      n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                         static_cast<int32_t>(out.size()), addSpecial, parseSpecial);
    }
    if (n < 0) throw Napi::Error::New(env, "tokenize: llama_tokenize failed");
    out.resize(static_cast<size_t>(n));
  }
  Napi::Int32Array arr = Napi::Int32Array::New(env, out.size());
  if (!out.empty()) std::memcpy(arr.Data(), out.data(), out.size() * sizeof(int32_t));
  return arr;
}

// tokenizeAsync(text: string | Buffer, addSpecial, asText?) -> Promise<{status, tokens, workerUs}>:
// special tokens parsed (none with asText: the whole text is literal), off the JS thread. A Buffer
// is taken byte for byte.
Napi::Value HeadroomLlama::TokenizeAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "tokenizeAsync: the context is closed");
  std::string text;
  if (info[0].IsBuffer()) {
    const Napi::Buffer<char> b = info[0].As<Napi::Buffer<char>>();
    text.assign(b.Data(), b.Length());
  } else {
    text = info[0].As<Napi::String>().Utf8Value();
  }
  auto* w = new TokenizeWorker(env, this, Napi::Persistent(Value()), tokenizer_.get(), std::move(text), info[1].ToBoolean().Value(),
                               info.Length() > 2 && info[2].ToBoolean().Value());
  Napi::Promise p = w->Promise();
  numTokenizing_++;
  w->Queue();
  return p;
}

// chatInit(overrideSrc: string) -> JSON string (ChatTemplates::infoJson): loads the chat template
// (the GGUF's, the override's, or ChatML when there is neither) into llama.cpp's chat code. Throws
// with the template engine's message when it does not parse. Call before any chat request.
Napi::Value HeadroomLlama::ChatInit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (model_ == nullptr) throw Napi::Error::New(env, "chatInit: the context is closed");
  if (numTokenizing_ > 0) throw Napi::Error::New(env, "chatInit: a tokenization is in flight");
  const std::string src = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  // llama.cpp's common log would print the chat code's warnings to stderr; Headroom reports
  // failures itself (a parse failure comes back to JS as an error).
  common_log_set_verbosity_thold(-1);
  try {
    chat_ = std::make_unique<ChatTemplates>(model_, tokenizer_.get(), src);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("the chat template does not parse: ") + e.what());
  }
  return Napi::String::New(env, chat_->infoJson());
}

// chatRender(requestJson, literalControlText) -> {prompt, literal: Int32Array [from, to, ...] (byte
// offsets), params: string}, on the calling thread (tests, fixtures). Throws a TypeError for a
// request the chat code refuses and an Error when the template fails.
Napi::Value HeadroomLlama::ChatRender(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (chat_ == nullptr) throw Napi::Error::New(env, "chatRender: chatInit first");
  ChatRendered r;
  try {
    r = chat_->render(info[0].As<Napi::String>().Utf8Value(), info[1].ToBoolean().Value());
  } catch (const std::invalid_argument& e) {
    throw Napi::TypeError::New(env, e.what());
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("prompt", Napi::String::New(env, r.prompt));
  Napi::Int32Array lit = Napi::Int32Array::New(env, r.literal.size() * 2);
  for (size_t i = 0; i < r.literal.size(); i++) {
    lit[i * 2] = static_cast<int32_t>(r.literal[i].first);
    lit[i * 2 + 1] = static_cast<int32_t>(r.literal[i].second);
  }
  o.Set("literal", lit);
  o.Set("params", Napi::String::New(env, r.paramsJson));
  return o;
}

// chatTokenizeAsync(requestJson, literalControlText) -> Promise<{status, tokens, params, error,
// workerUs}>: the conversation rendered by the chat template and tokenized (BOS as the vocabulary
// asks, special tokens parsed outside literal ranges), off the JS thread. status 0 ok, 1 a request
// the chat code refuses (error says why), 2 the template failed (error says why).
Napi::Value HeadroomLlama::ChatTokenizeAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "chatTokenizeAsync: the context is closed");
  if (chat_ == nullptr) throw Napi::Error::New(env, "chatTokenizeAsync: chatInit first");
  if (info.Length() < 2 || !info[0].IsString()) throw Napi::TypeError::New(env, "chatTokenizeAsync: expected (requestJson, literalControlText)");
  auto* w = new TokenizeWorker(env, this, Napi::Persistent(Value()), tokenizer_.get(), chat_.get(), info[0].As<Napi::String>().Utf8Value(),
                               info[1].ToBoolean().Value());
  Napi::Promise p = w->Promise();
  numTokenizing_++;
  w->Queue();
  return p;
}

// tokenPiece(token) -> Buffer of the raw bytes the token stands for (a byte token gives one byte,
// possibly half a UTF-8 character: the JS detokenizer reassembles them). Special tokens render empty.
Napi::Value HeadroomLlama::TokenPiece(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "tokenPiece: the context is closed");
  const int32_t tok = info[0].As<Napi::Number>().Int32Value();
  const bool special = info.Length() > 1 && info[1].ToBoolean().Value();
  char buf[256];
  int32_t n = llama_token_to_piece(vocab_, tok, buf, sizeof(buf), 0, special);
  if (n >= 0) return Napi::Buffer<char>::Copy(env, buf, static_cast<size_t>(n));
  std::vector<char> big(static_cast<size_t>(-n));
  n = llama_token_to_piece(vocab_, tok, big.data(), static_cast<int32_t>(big.size()), 0, special);
  return Napi::Buffer<char>::Copy(env, big.data(), static_cast<size_t>(n < 0 ? 0 : n));
}

Napi::Value HeadroomLlama::IsEog(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (vocab_ == nullptr) throw Napi::Error::New(env, "isEog: the context is closed");
  return Napi::Boolean::New(env, llama_vocab_is_eog(vocab_, info[0].As<Napi::Number>().Int32Value()));
}

Napi::Value HeadroomLlama::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (ctx_ == nullptr) throw Napi::Error::New(env, "info: the context is closed");
  Napi::Object o = Napi::Object::New(env);
  char desc[256];
  llama_model_desc(model_, desc, sizeof(desc));
  o.Set("description", Napi::String::New(env, desc));
  o.Set("numParams", Napi::Number::New(env, static_cast<double>(llama_model_n_params(model_))));
  o.Set("modelBytes", Napi::Number::New(env, static_cast<double>(llama_model_size(model_))));
  o.Set("nCtx", Napi::Number::New(env, llama_n_ctx(ctx_)));
  o.Set("nCtxTrain", Napi::Number::New(env, llama_model_n_ctx_train(model_)));
  o.Set("nBatch", Napi::Number::New(env, nBatch_));
  o.Set("nUbatch", Napi::Number::New(env, llama_n_ubatch(ctx_)));
  o.Set("threadPool", Napi::Boolean::New(env, threadpool_ != nullptr));
  o.Set("threadPoll", Napi::Number::New(env, threadpoolPoll_));
  o.Set("pinnedThreads", Napi::Boolean::New(env, pinned_));
  o.Set("nSeqMax", Napi::Number::New(env, nSeqMax_));
  o.Set("nVocab", Napi::Number::New(env, llama_vocab_n_tokens(vocab_)));
  o.Set("bos", Napi::Number::New(env, llama_vocab_bos(vocab_)));
  o.Set("eos", Napi::Number::New(env, llama_vocab_eos(vocab_)));
  o.Set("addBos", Napi::Boolean::New(env, llama_vocab_get_add_bos(vocab_)));
  o.Set("threads", Napi::Number::New(env, threads_));
  o.Set("threadsBatch", Napi::Number::New(env, threadsBatch_));
  o.Set("maxTokenBytes", Napi::Number::New(env, static_cast<double>(tokenizer_->maxTokenBytes())));
  o.Set("fastTokenizer", Napi::Boolean::New(env, tokenizer_->fast()));
  o.Set("tokenizerPath", Napi::String::New(env, tokenizer_->modeName()));
  o.Set("loadLog", Napi::String::New(env, loadLog_));
  o.Set("specialSplit", Napi::String::New(env, tokenizer_->onePass() ? "one-pass" : "per-token"));
  return o;
}

Napi::Value HeadroomLlama::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (busy_) throw Napi::Error::New(env, "close: a decode is in flight (await it first)");
  if (numTokenizing_ > 0) throw Napi::Error::New(env, "close: a tokenization is in flight (await it first)");
  freeAll();
  return env.Undefined();
}
