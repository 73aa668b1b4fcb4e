// One step's llama_decode calls plus native sampling, either off the JS thread (DecodeWorker, an N-API
// AsyncWorker on a libuv pool thread) or on it (HeadroomLlama::DecodeSync, for steps so short that
// the two thread hand-offs around them cost a measurable share: docs/per-token.md §10).
//
// For a sequence that asked for log-probabilities, each sampled row also yields the chosen token's
// log-probability and its top-k alternatives, from a log-softmax of the raw logits (before any
// sampler changes them) computed here: O(vocab) per row, never a logits row copied into JS.
// A sampler that throws (a grammar with no way forward) ends the step with status 3 and a message.
//
// A step may be cut into segments of consecutive rows, each its own llama_decode, sampled before
// the next overwrites the logits: llama.cpp's CPU flash attention runs a batch of 64 rows or more
// through a kernel that walks 64 query rows at a time against every KV tile any of them sees, so a
// decoding row batched with a prompt chunk makes the chunk's first tile walk the decoder's whole
// context (bench/native/mixed-cost.ts; docs/per-token.md §19). A segment that fails takes the cells
// the segments before it wrote back out, so a refused step leaves the KV state as it was, as a
// single llama_decode does.
#pragma once

#include <napi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

class HeadroomLlama;

// A step's rows (column-wise: tokens[i], pos[i], seq[i], sample[i] describe batch row i) and what
// running it produced. Run() touches no JS value, so it may run on any thread; ToJs() on the JS one.
struct DecodeStep {
  std::vector<int32_t> tokens, pos, seq;
  std::vector<uint8_t> sample;
  // Where each segment ends (exclusive row index, increasing, the last = the row count); empty:
  // one segment, one llama_decode.
  std::vector<int32_t> segmentEnds;
  std::vector<int32_t> sampled;
  // Per sampled row: chosen log-probability (NaN when not asked for) and how many alternatives
  // follow in topIds/topLogprobs (flattened, in row order, most probable first).
  std::vector<float> chosenLogprob;
  std::vector<int32_t> numTop;
  std::vector<int32_t> topIds;
  std::vector<float> topLogprobs;
  std::string sampleError;
  int32_t status = 0;
  int32_t numCalls = 0;  // llama_decode calls made
  double decodeUs = 0;  // llama_decode alone (all calls)
  double sampleUs = 0;  // sampling all flagged rows
  double totalUs = 0;   // Run() from start to end (batch fill + decode + sampling)
  // From the JS call to Run() starting (0 on the JS thread), and from Run() ending to the result
  // reaching the JS thread (0 there): the thread hand-offs.
  double queueUs = 0;
  double returnUs = 0;
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point ended;

  void Run(HeadroomLlama* owner);
  Napi::Object ToJs(Napi::Env env) const;

 private:
  void forgetRows(HeadroomLlama* owner, int32_t end);
};

class DecodeWorker : public Napi::AsyncWorker {
 public:
  DecodeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, DecodeStep step);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  HeadroomLlama* owner_;
  Napi::ObjectReference ownerRef_;  // keeps the JS object (and the context) alive while we run
  Napi::Promise::Deferred deferred_;
  DecodeStep step_;
};
