#pragma once
// Speech data for deepspeech2: Deep Speech 2's character alphabet, a WAV reader/writer, the
// spectrogram front end (our own DFT), a synthetic spoken corpus made with Debian's espeak-ng
// at first use and cached, a reader for `path<TAB>transcript` manifests (real corpora), and
// padded batches for CTC training.
//
// Decisions (docs: this header is the reference):
// - Alphabet, 29 symbols: 0 blank, 1 space, 2 apostrophe, 3..28 'a'..'z'.
// - Audio: RIFF PCM 16-bit mono at any rate, brought to 16 kHz by band-limited (Hann-windowed
//   sinc, 16 zero crossings, cut-off at the lower Nyquist) interpolation.
// - Spectrogram: 20 ms periodic Hamming windows (320 samples) every 10 ms (160), no padding:
//   T = 1 + (samples - 320) / 160 frames (0 below 320 samples); |DFT| of the 320 samples at
//   bins 0..160 (161 = 320 / 2 + 1), then log(1 + x); then normalised per utterance with one
//   mean and one standard deviation over all its T x 161 values (deepspeech.pytorch's choice;
//   per-bin statistics are unstable on one-word utterances).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "workloads/data/shard.h"

namespace ts::workloads {

// ---------------------------------------------------------------- alphabet

constexpr int64_t kSpeechAlphabetSize = 29;
constexpr int64_t kSpeechBlank = 0;
// Symbol i of the alphabet; index 0 (blank) is shown as '_'.
const std::string& speech_alphabet();
// Lower-case; ASCII letters and apostrophes (' and the typographic U+2019) kept; anything else
// (digits, punctuation, hyphens, other bytes) is a word break; runs of breaks become one space,
// none at either end. "Don't -- STOP!" -> "don't stop".
std::string normalize_transcript(std::string_view text);
// Labels 1..28 of a normalised transcript; throws std::invalid_argument on a symbol outside it.
std::vector<int64_t> encode_transcript(std::string_view normalized);
// The text of labels (blank and out-of-range labels are an error).
std::string decode_labels(const std::vector<int64_t>& labels);
// Frames CTC needs at least for these labels: one per label plus a blank between repeats.
int64_t ctc_min_frames(const std::vector<int64_t>& labels);
// Corpus-level character error rate: sum of Levenshtein distances / sum of reference lengths.
double character_error_rate(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// ---------------------------------------------------------------- audio

constexpr int kSpeechSampleRate = 16000;

struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;  // mono, in [-1, 1)
};

// RIFF/WAVE, PCM 16-bit, mono, any sample rate (WAVE_FORMAT_EXTENSIBLE with a PCM sub-format
// too). Anything else (float, 8/24/32-bit, A-law, stereo, truncated, not RIFF) throws
// std::runtime_error naming the file and what it holds. A data size of 0 or 0xFFFFFFFF
// (written by a streaming encoder that could not seek back) means "to the end of the file".
Audio read_wav(const std::string& path);
// Sample rate and sample count from the header alone.
struct WavInfo {
  int sample_rate = 0;
  int64_t samples = 0;
};
WavInfo read_wav_info(const std::string& path);
// 16-bit PCM mono; samples are clipped to [-1, 1]. Throws std::runtime_error on I/O failure.
void write_wav(const std::string& path, const std::vector<float>& samples, int sample_rate);
// Band-limited resampling (see the top of this file). Output length floor(n * to / from).
std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate);
int64_t resampled_length(int64_t samples, int from_rate, int to_rate);
// read_wav, then resampled to 16 kHz when it is not.
std::vector<float> load_audio_16k(const std::string& path);

// ---------------------------------------------------------------- spectrogram

constexpr int64_t kSpectrogramWindow = 320;  // 20 ms at 16 kHz
constexpr int64_t kSpectrogramHop = 160;     // 10 ms
constexpr int64_t kSpectrogramBins = 161;    // kSpectrogramWindow / 2 + 1
int64_t spectrogram_frames(int64_t samples);

enum class SpectrogramNorm { none, utterance };

// log(1 + |DFT|) of windowed frames, [T, 161] row-major. The DFT is direct (320 is not a power
// of two, and direct is fast enough: speech_data_test prints the milliseconds per second of
// audio): a table of window-weighted twiddles (161 x 320 cos and sin), dot products in 4-lane
// SIMD vectors, two frames per pass over the table.
std::vector<float> spectrogram(const std::vector<float>& samples16k, SpectrogramNorm norm = SpectrogramNorm::utterance);

// ---------------------------------------------------------------- corpora

struct Utterance {
  std::string audio;       // path of a WAV file
  std::string transcript;  // normalised (normalize_transcript)
};

// One `path<TAB>transcript` per line; relative paths resolve against the manifest's folder;
// empty lines and lines starting with '#' are skipped; transcripts are normalised. Throws
// std::runtime_error naming file:line for a line without a tab, an empty path, a transcript
// with no letters left, or a missing audio file; and for an unreadable or empty manifest.
std::vector<Utterance> read_manifest(const std::string& path);
// Paths inside the manifest's folder are written relative to it.
void write_manifest(const std::string& path, const std::vector<Utterance>& utterances);

// The synthetic corpus: a fixed list of words and short phrases, each spoken `variants` times
// with a voice, speed and pitch drawn from a seed.
struct SynthesisRequest {
  std::string text;
  std::string voice;  // espeak-ng -v
  int speed = 160;    // -s, words per minute
  int pitch = 50;     // -p, 0..99
};
const std::vector<std::string>& synthetic_phrases();
std::vector<SynthesisRequest> synthetic_requests(const std::vector<std::string>& phrases, int64_t variants,
                                                 uint64_t seed);
// $TS_SPEECH_CACHE when set, else $XDG_CACHE_HOME/trainscope/speech, else
// ~/.cache/trainscope/speech (else /tmp/trainscope-speech).
std::string default_speech_cache_dir();
// The espeak-ng executable: `hint` when given, else $TS_ESPEAK_NG, else espeak-ng on PATH.
// Throws std::runtime_error saying how to install it when it is not there.
std::string find_espeak_ng(const std::string& hint = "");
// Synthesises every request not yet in `cache_dir` (file names are a hash of text, voice,
// speed and pitch, so a changed list synthesises only what is new; files are written to a
// temporary name and renamed, so concurrent runs are safe), stored as 16 kHz WAV. Returns one
// utterance per request, in order. Runs espeak-ng through posix_spawn (no shell).
std::vector<Utterance> synthesize_corpus(const std::vector<SynthesisRequest>& requests, const std::string& cache_dir,
                                         const std::string& espeak_ng = "");

// ---------------------------------------------------------------- batches

struct SpeechBatch {
  engine::Tensor features;        // [N, 1, T, 161], zeros past each utterance's frames
  engine::Tensor input_lengths;   // [N] frames (fp32 integers)
  engine::Tensor targets;         // [sum L_n] labels 1..28, concatenated
  engine::Tensor target_lengths;  // [N]
  int64_t samples = 0;            // N; 0 past the end of the held-out set
  std::vector<std::string> transcripts;
};

struct SpeechDataOptions {
  double heldout_fraction = 0.1;  // by a hash of the audio path: stable when the list changes
  bool sortagrad = true;          // first epoch shortest first (Deep Speech 2's SortaGrad)
  uint64_t seed = 1;              // shuffling of later epochs
  SpectrogramNorm norm = SpectrogramNorm::utterance;
  int64_t feature_cache_bytes = int64_t{1} << 30;  // spectrograms kept in memory up to this
  // Data parallelism (shard.h): after the held-out split, rank r keeps the training utterances
  // i with i % world_size == r (corpus order); the held-out set is the same on every rank.
  DataShard shard;
};

class SpeechDataset {
 public:
  // Reads every WAV header (durations for sorting); audio is decoded when first batched.
  SpeechDataset(const std::vector<Utterance>& utterances, const SpeechDataOptions& options, engine::Device device);

  // The next `batch` training utterances, epochs running on (the last batch of an epoch is
  // filled from the next one). Tensors on the device, in memprof's `inputs` category.
  SpeechBatch next_train(int64_t batch);
  // Held-out batch `index` (sorted by duration, deterministic); samples == 0 past the end.
  SpeechBatch heldout(int64_t index, int64_t batch);
  int64_t train_size() const { return static_cast<int64_t>(train_.size()); }
  int64_t heldout_size() const { return static_cast<int64_t>(heldout_.size()); }
  int64_t epoch() const { return epoch_; }
  const std::vector<Utterance>& train_utterances() const { return train_; }
  const std::vector<Utterance>& heldout_utterances() const { return heldout_; }
  // Spectrogram frames of each utterance, from the headers.
  int64_t frames(const Utterance& u) const;

  // Features [T, 161] of one utterance (kept in memory while the budget allows).
  std::shared_ptr<const std::vector<float>> features(const Utterance& u);

 private:
  SpeechBatch make(const std::vector<const Utterance*>& items);
  void new_epoch();
  SpeechDataOptions options_;
  engine::Device device_;
  std::vector<Utterance> train_, heldout_;
  std::unordered_map<std::string, int64_t> frames_;  // by audio path
  std::unordered_map<std::string, std::shared_ptr<const std::vector<float>>> cache_;
  int64_t cached_bytes_ = 0;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t epoch_ = -1;
  engine::Rng rng_;
};

// "synthetic" (the espeak-ng corpus: every phrase spoken 4 times, voices drawn from a fixed
// corpus seed, cached), "synthetic:N" (N times), or "manifest:/path/list.tsv" (also any path
// ending in .tsv or .txt). cache_dir empty: default_speech_cache_dir().
std::vector<Utterance> load_speech_corpus(const std::string& spec, const std::string& cache_dir = "");
// Checks a data spec without loading anything; throws std::invalid_argument.
void check_speech_source(const std::string& spec);

// Padded batch from features ([T_i, 161] each) and transcripts; used by SpeechDataset.
SpeechBatch make_speech_batch(const std::vector<const std::vector<float>*>& features,
                              const std::vector<std::string>& transcripts, engine::Device device);

}  // namespace ts::workloads
