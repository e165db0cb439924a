#include "workloads/data/speech_data.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#include "engine/ops.h"

extern char** environ;

namespace ts::workloads {

namespace fs = std::filesystem;
using engine::Tensor;

namespace {

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

}  // namespace

// ---------------------------------------------------------------- alphabet

const std::string& speech_alphabet() {
  static const std::string a = "_ 'abcdefghijklmnopqrstuvwxyz";
  return a;
}

std::string normalize_transcript(std::string_view text) {
  std::string out;
  bool gap = false;
  auto put = [&](char c) {
    if (gap && !out.empty()) out += ' ';
    gap = false;
    out += c;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 'A' && c <= 'Z') {
      put(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || c == '\'') {
      put(static_cast<char>(c));
    } else if (c == 0xE2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
               static_cast<unsigned char>(text[i + 2]) == 0x99) {
      put('\'');  // U+2019, the typographic apostrophe
      i += 2;
    } else {
      gap = true;
    }
  }
  return out;
}

std::vector<int64_t> encode_transcript(std::string_view normalized) {
  std::vector<int64_t> labels;
  labels.reserve(normalized.size());
  for (size_t i = 0; i < normalized.size(); ++i) {
    const char c = normalized[i];
    if (c >= 'a' && c <= 'z') {
      labels.push_back(3 + (c - 'a'));
    } else if (c == ' ') {
      labels.push_back(1);
    } else if (c == '\'') {
      labels.push_back(2);
    } else {
      throw std::invalid_argument("encode_transcript: character " + std::to_string(static_cast<int>(c)) +
                                  " at position " + std::to_string(i) + " of \"" + std::string(normalized) +
                                  "\" is not in the alphabet (normalize_transcript first)");
    }
  }
  return labels;
}

std::string decode_labels(const std::vector<int64_t>& labels) {
  std::string s;
  s.reserve(labels.size());
  for (int64_t l : labels) {
    if (l <= kSpeechBlank || l >= kSpeechAlphabetSize) {
      throw std::invalid_argument("decode_labels: label " + std::to_string(l) + " is not a character (1.." +
                                  std::to_string(kSpeechAlphabetSize - 1) + ")");
    }
    s += speech_alphabet()[static_cast<size_t>(l)];
  }
  return s;
}

int64_t ctc_min_frames(const std::vector<int64_t>& labels) {
  int64_t n = static_cast<int64_t>(labels.size());
  for (size_t i = 1; i < labels.size(); ++i) n += labels[i] == labels[i - 1] ? 1 : 0;
  return n;
}

double character_error_rate(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  auto codes = [](const std::vector<std::string>& v) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& s : v) out.emplace_back(s.begin(), s.end());
    return out;
  };
  return engine::ops::error_rate(codes(hypotheses), codes(references));
}

// ---------------------------------------------------------------- WAV

namespace {

[[noreturn]] void wav_error(const std::string& path, const std::string& msg) {
  throw std::runtime_error("WAV " + path + ": " + msg);
}

uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

std::string format_name(uint16_t tag) {
  switch (tag) {
    case 2: return "MS ADPCM";
    case 3: return "IEEE float";
    case 6: return "A-law";
    case 7: return "mu-law";
    case 0x11: return "IMA ADPCM";
    case 0x55: return "MP3";
    default: return "format tag " + std::to_string(tag);
  }
}

constexpr const char* kConvertHint = " (convert with `sox in.wav -b 16 -c 1 out.wav` or "
                                     "`ffmpeg -i in -ac 1 -c:a pcm_s16le out.wav`)";

// Validates the header; leaves `in` at the first audio byte and returns the byte count.
struct WavHeader {
  int sample_rate = 0;
  int64_t data_bytes = 0;
};

WavHeader parse_wav_header(std::ifstream& in, const std::string& path) {
  if (!in) wav_error(path, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  unsigned char riff[12];
  if (!in.read(reinterpret_cast<char*>(riff), 12)) wav_error(path, "shorter than a RIFF header");
  if (std::memcmp(riff, "RIFX", 4) == 0)
    wav_error(path, std::string("big-endian RIFX is not supported") + kConvertHint);
  if (std::memcmp(riff, "RF64", 4) == 0) wav_error(path, std::string("RF64 is not supported") + kConvertHint);
  if (std::memcmp(riff, "RIFF", 4) != 0 || std::memcmp(riff + 8, "WAVE", 4) != 0) {
    wav_error(path, "not a RIFF/WAVE file");
  }
  bool have_fmt = false;
  WavHeader h;
  while (true) {
    unsigned char ch[8];
    if (!in.read(reinterpret_cast<char*>(ch), 8)) wav_error(path, have_fmt ? "no data chunk" : "no fmt chunk");
    const uint32_t size = le32(ch + 4);
    const int64_t body = static_cast<int64_t>(in.tellg());
    if (std::memcmp(ch, "fmt ", 4) == 0) {
      if (size < 16) wav_error(path, "fmt chunk of " + std::to_string(size) + " bytes");
      unsigned char f[40] = {};
      if (!in.read(reinterpret_cast<char*>(f), std::min<uint32_t>(size, 40))) wav_error(path, "truncated fmt chunk");
      uint16_t tag = le16(f);
      const uint16_t channels = le16(f + 2);
      const uint32_t rate = le32(f + 4);
      const uint16_t bits = le16(f + 14);
      if (tag == 0xFFFE && size >= 26) tag = le16(f + 24);  // WAVE_FORMAT_EXTENSIBLE: the sub-format
      if (tag != 1) wav_error(path, "holds " + format_name(tag) + "; only 16-bit PCM is supported" + kConvertHint);
      if (bits != 16) {
        wav_error(path, "holds " + std::to_string(bits) + "-bit PCM; only 16-bit is supported" + kConvertHint);
      }
      if (channels != 1) {
        wav_error(path, "has " + std::to_string(channels) + " channels; only mono is supported" + kConvertHint);
      }
      if (rate < 1000 || rate > 384000)
        wav_error(path, "sample rate " + std::to_string(rate) + " Hz is outside 1000..384000");
      h.sample_rate = static_cast<int>(rate);
      have_fmt = true;
    } else if (std::memcmp(ch, "data", 4) == 0) {
      if (!have_fmt) wav_error(path, "data chunk before the fmt chunk");
      const int64_t available = file_size - body;
      if (size == 0 || size == 0xFFFFFFFFu) {
        h.data_bytes = available;  // a streaming writer could not seek back to fill the size in
      } else if (static_cast<int64_t>(size) > available) {
        wav_error(path, "truncated: the header announces " + std::to_string(size) + " bytes of audio, the file holds " +
                            std::to_string(available));
      } else {
        h.data_bytes = size;
      }
      h.data_bytes -= h.data_bytes % 2;
      return h;
    }
    // Chunks are padded to an even size.
    in.seekg(body + static_cast<int64_t>(size) + (size & 1));
    if (!in) wav_error(path, "truncated chunk");
  }
}

void put16(std::string& s, uint16_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>(v >> 8);
}
void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

Audio read_wav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const WavHeader h = parse_wav_header(in, path);
  std::vector<unsigned char> bytes(static_cast<size_t>(h.data_bytes));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
    wav_error(path, "read failed");
  }
  Audio a;
  a.sample_rate = h.sample_rate;
  a.samples.resize(bytes.size() / 2);
  for (size_t i = 0; i < a.samples.size(); ++i) {
    a.samples[i] = static_cast<float>(static_cast<int16_t>(le16(&bytes[2 * i]))) / 32768.0f;
  }
  return a;
}

WavInfo read_wav_info(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const WavHeader h = parse_wav_header(in, path);
  return {h.sample_rate, h.data_bytes / 2};
}

void write_wav(const std::string& path, const std::vector<float>& samples, int sample_rate) {
  if (sample_rate <= 0) throw std::invalid_argument("write_wav: sample rate " + std::to_string(sample_rate));
  const auto data_bytes = static_cast<uint64_t>(samples.size()) * 2;
  if (data_bytes > 0xFFFFFFFFull - 36) throw std::invalid_argument("write_wav: too long for a WAV file");
  std::string s;
  s.reserve(44 + data_bytes);
  s += "RIFF";
  put32(s, static_cast<uint32_t>(36 + data_bytes));
  s += "WAVEfmt ";
  put32(s, 16);
  put16(s, 1);  // PCM
  put16(s, 1);  // mono
  put32(s, static_cast<uint32_t>(sample_rate));
  put32(s, static_cast<uint32_t>(sample_rate) * 2);
  put16(s, 2);
  put16(s, 16);
  s += "data";
  put32(s, static_cast<uint32_t>(data_bytes));
  for (float x : samples) {
    // x 32768, the inverse of read_wav's / 32768, so a round trip is exact to the 16-bit step.
    const long v = std::clamp(std::lrint(static_cast<double>(x) * 32768.0), -32768L, 32767L);
    put16(s, static_cast<uint16_t>(static_cast<int16_t>(v)));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.write(s.data(), static_cast<std::streamsize>(s.size())) || !out.flush()) {
    throw std::runtime_error("write_wav: cannot write " + path + ": " + std::strerror(errno));
  }
}

int64_t resampled_length(int64_t samples, int from_rate, int to_rate) {
  if (from_rate <= 0 || to_rate <= 0) {
    throw std::invalid_argument("resample: rates " + std::to_string(from_rate) + " -> " + std::to_string(to_rate));
  }
  return samples * to_rate / from_rate;
}

std::vector<float> resample(const std::vector<float>& x, int from_rate, int to_rate) {
  const int64_t n_out = resampled_length(static_cast<int64_t>(x.size()), from_rate, to_rate);
  if (from_rate == to_rate) return x;
  // Output m sits at input position m * from / to = (m M + phase) / L with L, M coprime: L
  // phases, each with its own set of kernel taps.
  const int64_t g = std::gcd(from_rate, to_rate);
  const int64_t L = to_rate / g, M = from_rate / g;
  constexpr double kZeroCrossings = 16;
  const double fc = std::min(1.0, static_cast<double>(to_rate) / from_rate);  // of the input's Nyquist
  const double half = kZeroCrossings / fc;                                    // in input samples
  const auto H = static_cast<int64_t>(std::ceil(half));
  const int64_t taps = 2 * H + 2;
  auto kernel = [&](double d) {
    if (std::abs(d) >= half) return 0.0;
    const double a = M_PI * fc * d;
    const double sinc = d == 0 ? 1.0 : std::sin(a) / a;
    return fc * sinc * 0.5 * (1.0 + std::cos(M_PI * d / half));  // Hann window
  };
  // Tap j of phase p weighs input base - H + j, at distance p / L + H - j.
  auto fill = [&](int64_t p, float* w) {
    const double frac = static_cast<double>(p) / static_cast<double>(L);
    for (int64_t j = 0; j < taps; ++j) w[j] = static_cast<float>(kernel(frac + static_cast<double>(H - j)));
  };
  const bool table = L * taps <= (int64_t{1} << 22);
  std::vector<float> weights(static_cast<size_t>(table ? L * taps : taps));
  if (table) {
    for (int64_t p = 0; p < L; ++p) fill(p, &weights[static_cast<size_t>(p * taps)]);
  }
  const auto n_in = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(n_out));
  for (int64_t m = 0; m < n_out; ++m) {
    const int64_t pos = m * M;
    const int64_t base = pos / L, phase = pos % L;
    const float* w = weights.data();
    if (table) {
      w += phase * taps;
    } else {
      fill(phase, weights.data());
    }
    const int64_t first = base - H;
    const int64_t j0 = std::max<int64_t>(0, -first), j1 = std::min<int64_t>(taps, n_in - first);
    double acc = 0;
    for (int64_t j = j0; j < j1; ++j) acc += static_cast<double>(w[j]) * x[static_cast<size_t>(first + j)];
    y[static_cast<size_t>(m)] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> load_audio_16k(const std::string& path) {
  Audio a = read_wav(path);
  if (a.sample_rate == kSpeechSampleRate) return std::move(a.samples);
  return resample(a.samples, a.sample_rate, kSpeechSampleRate);
}

// ---------------------------------------------------------------- spectrogram

int64_t spectrogram_frames(int64_t samples) {
  return samples < kSpectrogramWindow ? 0 : 1 + (samples - kSpectrogramWindow) / kSpectrogramHop;
}

namespace {

// Twiddles with the periodic Hamming window folded in: row k holds w[n] cos(2 pi k n / 320)
// (and sin), so a bin is two dot products over the raw frame.
struct DftTables {
  std::vector<float> cos, sin;
  DftTables() : cos(kSpectrogramBins * kSpectrogramWindow), sin(kSpectrogramBins * kSpectrogramWindow) {
    constexpr int64_t N = kSpectrogramWindow;
    for (int64_t k = 0; k < kSpectrogramBins; ++k) {
      for (int64_t n = 0; n < N; ++n) {
        const double w = 0.54 - 0.46 * std::cos(2 * M_PI * static_cast<double>(n) / N);
        const double angle = 2 * M_PI * static_cast<double>((k * n) % N) / N;  // exact reduction first
        cos[static_cast<size_t>(k * N + n)] = static_cast<float>(w * std::cos(angle));
        sin[static_cast<size_t>(k * N + n)] = static_cast<float>(w * std::sin(angle));
      }
    }
  }
};

const DftTables& dft_tables() {
  static const DftTables t;
  return t;
}

// Four SIMD lanes (GCC's vector extension: SSE2 on any x86-64, NEON on ARM) per partial sum.
using Lanes = float __attribute__((vector_size(16)));

inline Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);  // an unaligned load
  return v;
}

inline float lane_sum(Lanes v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// Bin k of two frames at once: each twiddle row is loaded once for both, and the sums stay in
// registers (an array of partial sums would go through memory at every step).
inline void dft_bin(const float* xa, const float* xb, const float* c, const float* s, float out_a[2], float out_b[2]) {
  Lanes ra0{}, ra1{}, ia0{}, ia1{}, rb0{}, rb1{}, ib0{}, ib1{};
  for (int64_t n = 0; n < kSpectrogramWindow; n += 8) {
    const Lanes c0 = load_lanes(c + n), c1 = load_lanes(c + n + 4);
    const Lanes s0 = load_lanes(s + n), s1 = load_lanes(s + n + 4);
    const Lanes a0 = load_lanes(xa + n), a1 = load_lanes(xa + n + 4);
    const Lanes b0 = load_lanes(xb + n), b1 = load_lanes(xb + n + 4);
    ra0 += a0 * c0;
    ra1 += a1 * c1;
    ia0 += a0 * s0;
    ia1 += a1 * s1;
    rb0 += b0 * c0;
    rb1 += b1 * c1;
    ib0 += b0 * s0;
    ib1 += b1 * s1;
  }
  out_a[0] = lane_sum(ra0 + ra1);
  out_a[1] = lane_sum(ia0 + ia1);
  out_b[0] = lane_sum(rb0 + rb1);
  out_b[1] = lane_sum(ib0 + ib1);
}

}  // namespace

std::vector<float> spectrogram(const std::vector<float>& samples, SpectrogramNorm norm) {
  static_assert(kSpectrogramWindow % 8 == 0);
  const int64_t frames = spectrogram_frames(static_cast<int64_t>(samples.size()));
  std::vector<float> out(static_cast<size_t>(frames * kSpectrogramBins));
  const DftTables& tw = dft_tables();
  auto magnitude = [](const float v[2]) { return std::log1p(std::sqrt(v[0] * v[0] + v[1] * v[1])); };
  for (int64_t t = 0; t < frames; t += 2) {
    // An odd last frame is paired with itself.
    const int64_t u = std::min(t + 1, frames - 1);
    const float* xa = samples.data() + t * kSpectrogramHop;
    const float* xb = samples.data() + u * kSpectrogramHop;
    float* oa = out.data() + t * kSpectrogramBins;
    float* ob = out.data() + u * kSpectrogramBins;
    for (int64_t k = 0; k < kSpectrogramBins; ++k) {
      float a[2], b[2];
      dft_bin(xa, xb, tw.cos.data() + k * kSpectrogramWindow, tw.sin.data() + k * kSpectrogramWindow, a, b);
      oa[k] = magnitude(a);
      ob[k] = magnitude(b);
    }
  }
  if (norm == SpectrogramNorm::utterance && !out.empty()) {
    double sum = 0, sq = 0;
    for (float v : out) sum += v;
    const double mean = sum / static_cast<double>(out.size());
    for (float v : out) sq += (v - mean) * (v - mean);
    const double stddev = std::sqrt(sq / static_cast<double>(out.size()));
    const auto inv = static_cast<float>(1.0 / (stddev + 1e-6));  // silence: all zeros, not NaN
    for (float& v : out) v = (v - static_cast<float>(mean)) * inv;
  }
  return out;
}

// ---------------------------------------------------------------- manifests

std::vector<Utterance> read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("manifest " + path + ": cannot open: " + std::strerror(errno));
  const fs::path folder = fs::path(path).parent_path();
  std::vector<Utterance> out;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "manifest " + path + ":" + std::to_string(number) + ": ";
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) throw std::runtime_error(where + "expected `path<TAB>transcript`, found no tab");
    const std::string file = line.substr(0, tab);
    if (file.empty()) throw std::runtime_error(where + "empty audio path");
    Utterance u;
    const fs::path p(file);
    u.audio = (p.is_absolute() ? p : folder / p).lexically_normal().string();
    u.transcript = normalize_transcript(std::string_view(line).substr(tab + 1));
    if (std::none_of(u.transcript.begin(), u.transcript.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
      throw std::runtime_error(where + "transcript has no letters (after normalisation to a-z, space, apostrophe)");
    }
    std::error_code ec;
    if (!fs::is_regular_file(u.audio, ec)) throw std::runtime_error(where + "audio file " + u.audio + " not found");
    out.push_back(std::move(u));
  }
  if (in.bad()) throw std::runtime_error("manifest " + path + ": read error");
  if (out.empty()) throw std::runtime_error("manifest " + path + ": no utterances");
  return out;
}

void write_manifest(const std::string& path, const std::vector<Utterance>& utterances) {
  const fs::path folder = fs::path(path).parent_path();
  std::string text;
  for (const auto& u : utterances) {
    if (u.transcript.find_first_of("\t\n\r") != std::string::npos) {
      throw std::invalid_argument("write_manifest: transcript with a tab or newline: " + u.transcript);
    }
    const fs::path rel = fs::path(u.audio).lexically_relative(folder);
    const bool inside = !rel.empty() && *rel.begin() != "..";
    text += (inside ? rel.string() : u.audio) + "\t" + u.transcript + "\n";
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out.write(text.data(), static_cast<std::streamsize>(text.size())) || !out.flush()) {
    throw std::runtime_error("write_manifest: cannot write " + path);
  }
}

// ---------------------------------------------------------------- synthetic corpus

const std::vector<std::string>& synthetic_phrases() {
  // Words and short phrases covering every letter, the apostrophe and doubled letters (which
  // CTC must separate with a blank).
  static const std::vector<std::string> phrases = {
      "zero",
      "one",
      "two",
      "three",
      "four",
      "five",
      "six",
      "seven",
      "eight",
      "nine",
      "yes",
      "no",
      "up",
      "down",
      "left",
      "right",
      "on",
      "off",
      "stop",
      "go",
      "hello",
      "good morning",
      "thank you",
      "see you soon",
      "quick brown fox",
      "lazy dog",
      "jump over",
      "it's fine",
      "don't stop",
      "we'll see",
      "i'm here",
      "that's all",
      "open the door",
      "turn off the light",
      "play some music",
      "what time is it",
      "the weather is nice",
      "call my mother",
      "bookkeeper",
      "coffee",
      "balloon",
      "apple",
      "yellow",
      "jazz",
      "zebra",
      "kettle",
      "queen",
      "vivid",
      "express train",
      "wax fixer",
      "happy birthday",
      "good night",
      "speech recognition",
      "deep learning",
      "neural network",
      "train the model",
      "big data",
      "small batch",
      "next week",
      "read a book",
      "sweet dreams",
      "keep going",
      "all right",
      "just a moment",
  };
  return phrases;
}

namespace {

// espeak-ng's own English voices and some of its variants (mbrola voices need extra packages).
const std::vector<std::string>& synthesis_voices() {
  static const std::vector<std::string> voices = {
      "en-us",    "en-gb",    "en-gb-scotland", "en-029",   "en-gb-x-rp",
      "en-us+f3", "en-us+m3", "en-gb+f2",       "en-us+f4", "en-gb+m1",
  };
  return voices;
}

}  // namespace

std::vector<SynthesisRequest> synthetic_requests(const std::vector<std::string>& phrases, int64_t variants,
                                                 uint64_t seed) {
  if (variants < 1) throw std::invalid_argument("synthetic_requests: variants must be >= 1");
  std::vector<SynthesisRequest> out;
  for (const auto& phrase : phrases) {
    const std::string text = normalize_transcript(phrase);
    if (text.empty()) throw std::invalid_argument("synthetic_requests: phrase \"" + phrase + "\" has no letters");
    for (int64_t v = 0; v < variants; ++v) {
      // Seeded per (phrase, variant): adding a phrase leaves the others' draws alone.
      engine::Rng rng(fnv1a(text, seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(v) + 1));
      SynthesisRequest r;
      r.text = text;
      r.voice = synthesis_voices()[static_cast<size_t>(rng.integer(static_cast<int64_t>(synthesis_voices().size())))];
      r.speed = static_cast<int>(120 + rng.integer(81));  // 120..200 words per minute
      r.pitch = static_cast<int>(25 + rng.integer(51));   // 25..75
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string default_speech_cache_dir() {
  if (const char* e = std::getenv("TS_SPEECH_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')
    return (fs::path(x) / "trainscope/speech").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache/trainscope/speech").string();
  return "/tmp/trainscope-speech";
}

namespace {

constexpr const char* kInstallHint =
    "install it with `sudo apt-get install espeak-ng` (scripts/setup installs it), or point "
    "TS_ESPEAK_NG at the executable";

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Runs argv[0] (a path) with stdout discarded; returns the exit status and its stderr.
int run_process(const std::vector<std::string>& args, std::string& err) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);  // dup2 clears close-on-exec
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  char buf[4096];
  ssize_t got;
  while ((got = ::read(pipe_fds[0], buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0 && err.size() < 16384) err.append(buf, static_cast<size_t>(got));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string request_key(const SynthesisRequest& r) {
  // Version 1 of the recipe (espeak-ng output resampled to 16 kHz, 16-bit mono).
  return hex64(fnv1a("v1|" + r.voice + "|" + std::to_string(r.speed) + "|" + std::to_string(r.pitch) + "|" + r.text));
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp";
}

}  // namespace

std::string find_espeak_ng(const std::string& hint) {
  std::string wanted = hint;
  if (wanted.empty()) {
    if (const char* e = std::getenv("TS_ESPEAK_NG"); e && *e) wanted = e;
  }
  if (!wanted.empty()) {
    if (wanted.find('/') != std::string::npos) {
      if (executable(wanted)) return wanted;
      throw std::runtime_error("espeak-ng: " + wanted + " is not an executable file; " + kInstallHint);
    }
  } else {
    wanted = "espeak-ng";
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (dir.empty()) continue;
      const fs::path candidate = fs::path(dir) / wanted;
      if (executable(candidate)) return candidate.string();
    }
  }
  throw std::runtime_error("the synthetic speech corpus needs espeak-ng, which is not on PATH: " +
                           std::string(kInstallHint));
}

std::vector<Utterance> synthesize_corpus(const std::vector<SynthesisRequest>& requests, const std::string& cache_dir,
                                         const std::string& espeak_ng) {
  const fs::path dir = cache_dir.empty() ? fs::path(default_speech_cache_dir()) : fs::path(cache_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("speech cache " + dir.string() + ": " + ec.message());
  std::string exe;  // looked up only when something is missing: a full cache needs no espeak-ng
  std::vector<Utterance> out;
  out.reserve(requests.size());
  for (const auto& r : requests) {
    if (r.text.empty() || normalize_transcript(r.text) != r.text) {
      throw std::invalid_argument("synthesize_corpus: text \"" + r.text + "\" is not a normalised transcript");
    }
    const fs::path wav = dir / (request_key(r) + ".wav");
    if (!fs::exists(wav, ec)) {
      if (exe.empty()) exe = find_espeak_ng(espeak_ng);
      const fs::path raw = dir / (request_key(r) + ".raw" + unique_suffix());
      std::string err;
      const int status = run_process({exe, "-w", raw.string(), "-s", std::to_string(r.speed), "-p",
                                      std::to_string(r.pitch), "-v", r.voice, r.text},
                                     err);
      if (status != 0 || !fs::exists(raw, ec)) {
        fs::remove(raw, ec);
        throw std::runtime_error("espeak-ng failed (exit " + std::to_string(status) + ") on \"" + r.text +
                                 "\" with voice " + r.voice + ": " + err);
      }
      std::vector<float> audio;
      try {
        audio = load_audio_16k(raw.string());
      } catch (...) {
        fs::remove(raw, ec);
        throw;
      }
      fs::remove(raw, ec);
      if (audio.empty()) throw std::runtime_error("espeak-ng wrote no audio for \"" + r.text + "\": " + err);
      const fs::path part = dir / (request_key(r) + ".wav" + unique_suffix());
      write_wav(part.string(), audio, kSpeechSampleRate);
      fs::rename(part, wav, ec);  // atomic: a concurrent run sees a whole file or none
      if (ec) {
        fs::remove(part, ec);
        if (!fs::exists(wav)) throw std::runtime_error("speech cache: cannot create " + wav.string());
      }
    }
    out.push_back({wav.string(), r.text});
  }
  return out;
}

// ---------------------------------------------------------------- batches

SpeechBatch make_speech_batch(const std::vector<const std::vector<float>*>& features,
                              const std::vector<std::string>& transcripts, engine::Device device) {
  if (features.empty() || features.size() != transcripts.size()) {
    throw std::invalid_argument("make_speech_batch: " + std::to_string(features.size()) + " feature sets for " +
                                std::to_string(transcripts.size()) + " transcripts");
  }
  const auto n = static_cast<int64_t>(features.size());
  int64_t t_max = 0;
  for (const auto* f : features) {
    if (f->size() % kSpectrogramBins != 0) throw std::invalid_argument("make_speech_batch: features not [T, 161]");
    t_max = std::max(t_max, static_cast<int64_t>(f->size()) / kSpectrogramBins);
  }
  // Sized from the user's batch: checked, and refused with the bytes when larger than the machine.
  std::vector<float> x = engine::cpu::host_buffer<float>({n, t_max, kSpectrogramBins}, "speech batch features");
  std::vector<float> frames, targets, target_lengths;
  for (int64_t i = 0; i < n; ++i) {
    const auto& f = *features[static_cast<size_t>(i)];
    std::copy(f.begin(), f.end(), x.begin() + i * t_max * kSpectrogramBins);
    frames.push_back(static_cast<float>(f.size() / kSpectrogramBins));
    const auto labels = encode_transcript(transcripts[static_cast<size_t>(i)]);
    for (int64_t l : labels) targets.push_back(static_cast<float>(l));
    target_lengths.push_back(static_cast<float>(labels.size()));
  }
  // Host data to the device (Tensor::from_vector copies host -> cuda); tagged as inputs.
  engine::CategoryScope category(vocabulary::Category::inputs);
  SpeechBatch b;
  b.samples = n;
  b.transcripts = transcripts;
  const engine::Shape xs{n, 1, t_max, kSpectrogramBins};
  const engine::Shape ts{static_cast<int64_t>(targets.size())};
  if (device.is_meta()) {
    b.features = Tensor::empty(xs, device);
    b.input_lengths = Tensor::empty({n}, device);
    b.targets = Tensor::empty(ts, device);
    b.target_lengths = Tensor::empty({n}, device);
    return b;
  }
  b.features = Tensor::from_vector(xs, x, device);
  b.input_lengths = Tensor::from_vector({n}, frames, device);
  b.targets = Tensor::from_vector(ts, targets, device);
  b.target_lengths = Tensor::from_vector({n}, target_lengths, device);
  return b;
}

SpeechDataset::SpeechDataset(const std::vector<Utterance>& utterances, const SpeechDataOptions& options,
                             engine::Device device)
    : options_(options), device_(device), rng_(options.seed * 0x2545f4914f6cdd1dull + 7) {
  if (utterances.empty()) throw std::invalid_argument("SpeechDataset: no utterances");
  check_shard(options.shard, "SpeechDataset");
  if (!(options.heldout_fraction >= 0 && options.heldout_fraction < 1)) {
    throw std::invalid_argument("SpeechDataset: heldout_fraction must be in [0, 1)");
  }
  std::vector<uint64_t> hashes;
  for (const auto& u : utterances) {
    encode_transcript(u.transcript);  // fails early on a transcript that was not normalised
    const WavInfo info = read_wav_info(u.audio);
    const int64_t f = spectrogram_frames(resampled_length(info.samples, info.sample_rate, kSpeechSampleRate));
    if (f == 0) throw std::runtime_error("SpeechDataset: " + u.audio + " is shorter than one 20 ms frame");
    frames_[u.audio] = f;
    // Split by file name and transcript: the same corpus splits the same wherever it lives.
    hashes.push_back(fnv1a(fs::path(u.audio).filename().string() + "\t" + u.transcript));
  }
  const auto cut = static_cast<uint64_t>(options.heldout_fraction * 18446744073709551616.0);
  for (size_t i = 0; i < utterances.size(); ++i) {
    (hashes[i] < cut ? heldout_ : train_).push_back(utterances[i]);
  }
  if (heldout_.empty() && options.heldout_fraction > 0 && utterances.size() >= 2) {
    // A small corpus the hash put entirely in training: hold out its smallest hash.
    const size_t i = static_cast<size_t>(std::min_element(hashes.begin(), hashes.end()) - hashes.begin());
    heldout_.push_back(utterances[i]);
    train_.erase(
        std::find_if(train_.begin(), train_.end(), [&](const Utterance& u) { return u.audio == utterances[i].audio; }));
  }
  if (train_.empty()) throw std::invalid_argument("SpeechDataset: the split left no training utterances");
  train_ = take_shard(train_, options.shard, "SpeechDataset: the training utterances");
  std::stable_sort(heldout_.begin(), heldout_.end(),
                   [&](const Utterance& a, const Utterance& b) { return frames(a) < frames(b); });
}

int64_t SpeechDataset::frames(const Utterance& u) const {
  const auto it = frames_.find(u.audio);
  if (it == frames_.end()) throw std::invalid_argument("SpeechDataset: unknown utterance " + u.audio);
  return it->second;
}

std::shared_ptr<const std::vector<float>> SpeechDataset::features(const Utterance& u) {
  if (const auto it = cache_.find(u.audio); it != cache_.end()) return it->second;
  auto f = std::make_shared<const std::vector<float>>(spectrogram(load_audio_16k(u.audio), options_.norm));
  const auto bytes = static_cast<int64_t>(f->size() * sizeof(float));
  if (cached_bytes_ + bytes <= options_.feature_cache_bytes) {
    cache_[u.audio] = f;
    cached_bytes_ += bytes;
  }
  return f;
}

void SpeechDataset::new_epoch() {
  ++epoch_;
  order_.resize(train_.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (epoch_ == 0 && options_.sortagrad) {
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return frames(train_[a]) < frames(train_[b]); });
  } else {
    for (size_t i = order_.size(); i > 1; --i) {
      std::swap(order_[i - 1], order_[static_cast<size_t>(rng_.integer(static_cast<int64_t>(i)))]);
    }
  }
  cursor_ = 0;
}

SpeechBatch SpeechDataset::make(const std::vector<const Utterance*>& items) {
  std::vector<std::shared_ptr<const std::vector<float>>> held;
  std::vector<const std::vector<float>*> feats;
  std::vector<std::string> texts;
  for (const Utterance* u : items) {
    held.push_back(features(*u));
    feats.push_back(held.back().get());
    texts.push_back(u->transcript);
  }
  return make_speech_batch(feats, texts, device_);
}

SpeechBatch SpeechDataset::next_train(int64_t batch) {
  if (batch < 1) throw std::invalid_argument("SpeechDataset: batch must be >= 1");
  // The features alone take batch x (the shortest utterance's frames) x 161 floats or more:
  // checked before the per-sample lists and spectrograms are built, which would fill memory first.
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (const auto& [audio, count] : frames_) shortest = std::min(shortest, count);
  engine::cpu::check_host_buffer({batch, shortest, kSpectrogramBins}, sizeof(float), "speech batch features");
  std::vector<const Utterance*> items;
  while (static_cast<int64_t>(items.size()) < batch) {
    if (epoch_ < 0 || cursor_ >= order_.size()) new_epoch();
    items.push_back(&train_[order_[cursor_++]]);
  }
  return make(items);
}

SpeechBatch SpeechDataset::heldout(int64_t index, int64_t batch) {
  if (batch < 1 || index < 0) throw std::invalid_argument("SpeechDataset: bad held-out batch");
  const int64_t first = index * batch;
  if (first >= heldout_size()) return SpeechBatch{};
  std::vector<const Utterance*> items;
  for (int64_t i = first; i < std::min(first + batch, heldout_size()); ++i) {
    items.push_back(&heldout_[static_cast<size_t>(i)]);
  }
  return make(items);
}

// ---------------------------------------------------------------- specs

namespace {

struct SpeechSpec {
  bool synthetic = false;
  int64_t variants = 4;
  std::string manifest;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

SpeechSpec parse_spec(const std::string& spec) {
  SpeechSpec s;
  if (spec == "synthetic") {
    s.synthetic = true;
  } else if (spec.rfind("synthetic:", 0) == 0) {
    s.synthetic = true;
    const std::string n = spec.substr(10);
    char* end = nullptr;
    const long long v = std::strtoll(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v < 1 || v > 1000) {
      throw std::invalid_argument("speech data \"" + spec + "\": synthetic:N needs N in 1..1000");
    }
    s.variants = v;
  } else if (spec.rfind("manifest:", 0) == 0) {
    s.manifest = spec.substr(9);
  } else if (ends_with(spec, ".tsv") || ends_with(spec, ".txt")) {
    s.manifest = spec;
  } else {
    throw std::invalid_argument("speech data \"" + spec +
                                "\": expected synthetic, synthetic:N or manifest:/path/to/list.tsv (lines of "
                                "path<TAB>transcript)");
  }
  if (!s.synthetic && s.manifest.empty()) throw std::invalid_argument("speech data \"" + spec + "\": empty path");
  return s;
}

}  // namespace

void check_speech_source(const std::string& spec) {
  const SpeechSpec s = parse_spec(spec);
  std::error_code ec;
  if (!s.synthetic && !fs::is_regular_file(s.manifest, ec)) {
    throw std::invalid_argument("speech data: manifest " + s.manifest + " not found");
  }
}

std::vector<Utterance> load_speech_corpus(const std::string& spec, const std::string& cache_dir) {
  const SpeechSpec s = parse_spec(spec);
  if (!s.synthetic) return read_manifest(s.manifest);
  constexpr uint64_t kCorpusSeed = 1;  // the corpus is a fixed data set; run seeds only shuffle it
  return synthesize_corpus(synthetic_requests(synthetic_phrases(), s.variants, kCorpusSeed), cache_dir);
}

}  // namespace ts::workloads
