// DecodeWorker: one llama_decode plus native sampling, off the JS thread (an N-API AsyncWorker).
//
// For a sequence that asked for log-probabilities, each sampled row also yields the chosen token's
// log-probability and its top-k alternatives, from a log-softmax of the raw logits (before any
// sampler changes them) computed here: O(vocab) per row, never a logits row copied into JS.
// A sampler that throws (a grammar with no way forward) ends the step with status 3 and a message.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

class HeadroomLlama;

class DecodeWorker : public Napi::AsyncWorker {
 public:
  // rows are column-wise: tokens[i], pos[i], seq[i], sample[i] describe batch row i.
  DecodeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, std::vector<int32_t> tokens,
               std::vector<int32_t> pos, std::vector<int32_t> seq, std::vector<uint8_t> sample);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  HeadroomLlama* owner_;
  Napi::ObjectReference ownerRef_;  // keeps the JS object (and the context) alive while we run
  Napi::Promise::Deferred deferred_;
  std::vector<int32_t> tokens_, pos_, seq_;
  std::vector<uint8_t> sample_;
  std::vector<int32_t> sampled_;
  // Per sampled row: chosen log-probability (NaN when not asked for) and how many alternatives
  // follow in topIds_/topLogprobs_ (flattened, in row order, most probable first).
  std::vector<float> chosenLogprob_;
  std::vector<int32_t> numTop_;
  std::vector<int32_t> topIds_;
  std::vector<float> topLogprobs_;
  std::string sampleError_;
  int32_t status_ = 0;
  double decodeUs_ = 0;  // C++-side wall time of llama_decode
  double sampleUs_ = 0;  // C++-side wall time of sampling all flagged rows
  double totalUs_ = 0;   // Execute() from start to end (batch fill + decode + sampling)
};
