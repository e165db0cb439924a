// Speech data (workloads/data/speech_data.h): alphabet, WAV reading and writing, resampling,
// the spectrogram (against a naive DFT, pure tones, frame counts), manifests, batches, and the
// espeak-ng corpus. espeak-ng is required: scripts/setup installs it, and its absence fails.
#include "workloads/data/speech_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

#include "engine/context.h"
#include "env_override.h"

namespace ts::workloads {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ =
        fs::temp_directory_path() / ("ts_speech_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<float> sine(double freq, int rate, int64_t n, double amplitude = 0.5) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] =
        static_cast<float>(amplitude * std::sin(2 * M_PI * freq * static_cast<double>(i) / rate));
  }
  return v;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le(uint32_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A hand-made WAV: fmt fields as given, `extra` chunks before data, then `data` bytes with
// the announced size `data_size` (may lie).
std::string wav_bytes(uint16_t tag, uint16_t channels, uint32_t rate, uint16_t bits, const std::string& data,
                      uint32_t data_size, const std::string& extra = "", bool extensible = false) {
  std::string fmt = le(extensible ? 0xFFFE : tag, 2) + le(channels, 2) + le(rate, 4) +
                    le(rate * channels * bits / 8, 4) + le(channels * bits / 8, 2) + le(bits, 2);
  if (extensible) fmt += le(22, 2) + le(bits, 2) + le(4, 4) + le(tag, 2) + std::string(14, '\x01');
  std::string body =
      "WAVEfmt " + le(static_cast<uint32_t>(fmt.size()), 4) + fmt + extra + "data" + le(data_size, 4) + data;
  return "RIFF" + le(static_cast<uint32_t>(body.size()), 4) + body;
}

std::string pcm16(const std::vector<int16_t>& v) {
  std::string s;
  for (int16_t x : v) s += le(static_cast<uint16_t>(x), 2);
  return s;
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning \"" << needle << "\"";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- alphabet

TEST(SpeechData, AlphabetIsDeepSpeech2s) {
  const std::string& a = speech_alphabet();
  ASSERT_EQ(static_cast<int64_t>(a.size()), kSpeechAlphabetSize);
  EXPECT_EQ(a, "_ 'abcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(kSpeechBlank, 0);
  EXPECT_EQ(encode_transcript("a z' "), (std::vector<int64_t>{3, 1, 28, 2, 1}));
  EXPECT_EQ(decode_labels(encode_transcript("don't stop")), "don't stop");
  EXPECT_THROW(encode_transcript("Abc"), std::invalid_argument);
  EXPECT_THROW(encode_transcript("a1"), std::invalid_argument);
  EXPECT_THROW(decode_labels({3, 0}), std::invalid_argument);
  EXPECT_THROW(decode_labels({29}), std::invalid_argument);
}

TEST(SpeechData, NormalisesTranscripts) {
  EXPECT_EQ(normalize_transcript("Don't -- STOP!"), "don't stop");
  EXPECT_EQ(normalize_transcript("  Hello,   World.  "), "hello world");
  EXPECT_EQ(normalize_transcript("it\xE2\x80\x99s 42 o'clock"), "it's o'clock");  // U+2019
  EXPECT_EQ(normalize_transcript("caf\xC3\xA9-au-lait"), "caf au lait");          // non-ASCII: a break
  EXPECT_EQ(normalize_transcript("123 ..."), "");
}

TEST(SpeechData, CtcMinFramesAndCharacterErrorRate) {
  EXPECT_EQ(ctc_min_frames(encode_transcript("book")), 5);  // b o _ o k
  EXPECT_EQ(ctc_min_frames({}), 0);
  EXPECT_DOUBLE_EQ(character_error_rate({"kitten", "abc"}, {"sitting", "abc"}), 3.0 / 10.0);
  EXPECT_DOUBLE_EQ(character_error_rate({"hello world"}, {"hello world"}), 0.0);
}

// ---------------------------------------------------------------- WAV

TEST(SpeechData, WavRoundTrip) {
  TempDir dir;
  for (int rate : {16000, 22050, 8000}) {
    SCOPED_TRACE(rate);
    const auto x = sine(440, rate, rate / 2, 0.8);
    write_wav(dir / "a.wav", x, rate);
    EXPECT_EQ(fs::file_size(dir / "a.wav"), 44 + 2 * x.size());
    const Audio a = read_wav(dir / "a.wav");
    EXPECT_EQ(a.sample_rate, rate);
    ASSERT_EQ(a.samples.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(a.samples[i], x[i], 0.5 / 32768 + 1e-7) << i;
    const WavInfo info = read_wav_info(dir / "a.wav");
    EXPECT_EQ(info.sample_rate, rate);
    EXPECT_EQ(info.samples, static_cast<int64_t>(x.size()));
  }
  // Clipping instead of wrapping around.
  write_wav(dir / "c.wav", {2.0f, -2.0f}, 16000);
  const Audio c = read_wav(dir / "c.wav");
  EXPECT_NEAR(c.samples[0], 1.0f, 1e-4);
  EXPECT_NEAR(c.samples[1], -1.0f, 1e-4);
}

TEST(SpeechData, WavReaderAcceptsOtherChunksExtensibleAndStreamedSizes) {
  TempDir dir;
  const std::string data = pcm16({0, 16384, -16384, 32767});
  // A LIST chunk of odd size (padded) before the data.
  write_bytes(dir / "list.wav", wav_bytes(1, 1, 16000, 16, data, 8, "LIST" + le(3, 4) + "abc" + std::string(1, '\0')));
  EXPECT_EQ(read_wav(dir / "list.wav").samples, (std::vector<float>{0.0f, 0.5f, -0.5f, 32767.0f / 32768.0f}));
  write_bytes(dir / "ext.wav", wav_bytes(1, 1, 44100, 16, data, 8, "", true));
  EXPECT_EQ(read_wav(dir / "ext.wav").sample_rate, 44100);
  write_bytes(dir / "stream.wav", wav_bytes(1, 1, 16000, 16, data, 0xFFFFFFFFu));
  EXPECT_EQ(read_wav(dir / "stream.wav").samples.size(), 4u);
}

TEST(SpeechData, WavReaderRejectsOtherFormatsClearly) {
  TempDir dir;
  const std::string data = pcm16({1, 2, 3, 4});
  write_bytes(dir / "stereo.wav", wav_bytes(1, 2, 16000, 16, data, 8));
  expect_error([&] { read_wav(dir / "stereo.wav"); }, "2 channels; only mono");
  write_bytes(dir / "float.wav", wav_bytes(3, 1, 16000, 32, data, 8));
  expect_error([&] { read_wav(dir / "float.wav"); }, "IEEE float");
  write_bytes(dir / "ulaw.wav", wav_bytes(7, 1, 8000, 8, data, 8));
  expect_error([&] { read_wav(dir / "ulaw.wav"); }, "mu-law");
  write_bytes(dir / "u8.wav", wav_bytes(1, 1, 8000, 8, data, 8));
  expect_error([&] { read_wav(dir / "u8.wav"); }, "8-bit PCM");
  write_bytes(dir / "ext_float.wav", wav_bytes(3, 1, 16000, 32, data, 8, "", true));
  expect_error([&] { read_wav(dir / "ext_float.wav"); }, "IEEE float");
  write_bytes(dir / "short.wav", wav_bytes(1, 1, 16000, 16, data, 100));
  expect_error([&] { read_wav(dir / "short.wav"); }, "truncated");
  write_bytes(dir / "text.wav", "hello, I am not a WAV file at all");
  expect_error([&] { read_wav(dir / "text.wav"); }, "not a RIFF/WAVE file");
  write_bytes(dir / "nodata.wav", "RIFF" + le(4, 4) + "WAVE");
  expect_error([&] { read_wav(dir / "nodata.wav"); }, "no fmt chunk");
  expect_error([&] { read_wav(dir / "missing.wav"); }, "cannot open");
  // Every message names the file and, for formats, how to convert.
  expect_error([&] { read_wav(dir / "stereo.wav"); }, "stereo.wav");
  expect_error([&] { read_wav(dir / "float.wav"); }, "sox");
}

TEST(SpeechData, ResamplingKeepsToneAndRemovesAliases) {
  // 1 kHz at 22,050 Hz (espeak-ng's rate) -> 16 kHz: the same tone, away from the edges.
  for (int from : {22050, 44100, 8000, 48000}) {
    SCOPED_TRACE(from);
    const auto x = sine(1000, from, from);  // 1 s
    const auto y = resample(x, from, 16000);
    ASSERT_EQ(static_cast<int64_t>(y.size()), resampled_length(static_cast<int64_t>(x.size()), from, 16000));
    EXPECT_EQ(y.size(), 16000u);
    const auto want = sine(1000, 16000, 16000);
    double worst = 0;
    for (size_t i = 400; i + 400 < y.size(); ++i) worst = std::max(worst, std::abs(double(y[i]) - want[i]));
    EXPECT_LT(worst, 5e-3);
  }
  // 10 kHz cannot exist at 16 kHz: the low-pass removes it instead of folding it to 6 kHz.
  const auto y = resample(sine(10000, 44100, 44100), 44100, 16000);
  double energy = 0;
  for (size_t i = 400; i + 400 < y.size(); ++i) energy += double(y[i]) * y[i];
  EXPECT_LT(std::sqrt(energy / static_cast<double>(y.size() - 800)), 0.01);
  EXPECT_EQ(resample({1, 2, 3}, 16000, 16000), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(resample({1}, 0, 16000), std::invalid_argument);
}

// ---------------------------------------------------------------- spectrogram

TEST(SpeechData, FrameCountFormula) {
  // 20 ms windows every 10 ms, no padding: T = 1 + (n - 320) / 160.
  EXPECT_EQ(spectrogram_frames(0), 0);
  EXPECT_EQ(spectrogram_frames(319), 0);
  EXPECT_EQ(spectrogram_frames(320), 1);
  EXPECT_EQ(spectrogram_frames(479), 1);
  EXPECT_EQ(spectrogram_frames(480), 2);
  EXPECT_EQ(spectrogram_frames(16000), 99);
  EXPECT_EQ(kSpectrogramBins, 161);
  for (int64_t n : {0, 100, 320, 1000, 16000}) {
    EXPECT_EQ(static_cast<int64_t>(spectrogram(std::vector<float>(static_cast<size_t>(n), 0.1f)).size()),
              spectrogram_frames(n) * kSpectrogramBins);
  }
}

TEST(SpeechData, SpectrogramMatchesANaiveDft) {
  // 4 frames, and 3 (the kernel works on pairs of frames).
  for (size_t n : {800u, 640u}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(std::sin(0.01 * i * i) * 0.3 + 0.1 * std::cos(0.7 * i));
    const auto s = spectrogram(x, SpectrogramNorm::none);
    const int64_t frames = 1 + (static_cast<int64_t>(n) - 320) / 160;
    ASSERT_EQ(static_cast<int64_t>(s.size()), frames * 161);
    for (int64_t t = 0; t < frames; ++t) {
      for (int64_t k = 0; k < 161; ++k) {
        std::complex<double> acc = 0;
        for (int64_t j = 0; j < 320; ++j) {
          const double w = 0.54 - 0.46 * std::cos(2 * M_PI * j / 320.0);
          acc += w * x[static_cast<size_t>(t * 160 + j)] * std::polar(1.0, -2 * M_PI * k * j / 320.0);
        }
        EXPECT_NEAR(s[static_cast<size_t>(t * 161 + k)], std::log1p(std::abs(acc)), 2e-5) << t << " " << k;
      }
    }
  }
}

TEST(SpeechData, PureTonePeaksAtItsBin) {
  // Bin k is k * 16000 / 320 = 50 k Hz.
  for (double freq : {1000.0, 2550.0, 440.0, 7000.0}) {
    SCOPED_TRACE(freq);
    const int64_t bin = std::lround(freq / 50.0);
    for (SpectrogramNorm norm : {SpectrogramNorm::none, SpectrogramNorm::utterance}) {
      const auto s = spectrogram(sine(freq, 16000, 8000), norm);
      const int64_t frames = spectrogram_frames(8000);
      ASSERT_EQ(static_cast<int64_t>(s.size()), frames * 161);
      for (int64_t t = 0; t < frames; ++t) {
        const float* row = s.data() + t * 161;
        EXPECT_EQ(std::max_element(row, row + 161) - row, bin) << "frame " << t;
      }
    }
  }
}

TEST(SpeechData, UtteranceNormalisation) {
  const auto s = spectrogram(sine(1000, 16000, 16000), SpectrogramNorm::utterance);
  double sum = 0, sq = 0;
  for (float v : s) sum += v;
  const double mean = sum / static_cast<double>(s.size());
  for (float v : s) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(s.size())), 1.0, 1e-3);
  // Silence: all zeros, not NaN.
  for (float v : spectrogram(std::vector<float>(1600, 0.0f))) EXPECT_EQ(v, 0.0f);
}

// ---------------------------------------------------------------- manifests

TEST(SpeechData, ManifestReader) {
  TempDir dir;
  fs::create_directories(dir.path() / "clips");
  write_wav(dir / "clips/a.wav", sine(300, 16000, 4000), 16000);
  write_wav(dir / "b.wav", sine(600, 8000, 4000), 8000);
  const std::string manifest = dir / "list.tsv";
  write_bytes(manifest, "# a comment\n\nclips/a.wav\tHello, World!\r\n" + (dir / "b.wav") + "\tIt's   B\n");
  const auto u = read_manifest(manifest);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].audio, (dir.path() / "clips/a.wav").string());
  EXPECT_EQ(u[0].transcript, "hello world");
  EXPECT_EQ(u[1].audio, dir / "b.wav");
  EXPECT_EQ(u[1].transcript, "it's b");
  // Written back relative to its folder, read back the same.
  write_manifest(dir / "copy.tsv", u);
  std::ifstream in(dir / "copy.tsv");
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "clips/a.wav\thello world");
  const auto again = read_manifest(dir / "copy.tsv");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].audio, u[1].audio);
  // load_speech_corpus takes it as manifest:PATH and as a bare .tsv path.
  EXPECT_EQ(load_speech_corpus("manifest:" + manifest).size(), 2u);
  EXPECT_EQ(load_speech_corpus(manifest).size(), 2u);
}

TEST(SpeechData, ManifestErrorsNameFileAndLine) {
  TempDir dir;
  write_wav(dir / "a.wav", sine(300, 16000, 4000), 16000);
  write_bytes(dir / "notab.tsv", "a.wav\tfine\na.wav hello\n");
  expect_error([&] { read_manifest(dir / "notab.tsv"); }, "notab.tsv:2: expected `path<TAB>transcript`");
  write_bytes(dir / "missing.tsv", "nothere.wav\thello\n");
  expect_error([&] { read_manifest(dir / "missing.tsv"); }, "missing.tsv:1: audio file");
  write_bytes(dir / "noletters.tsv", "a.wav\t1234 !!\n");
  expect_error([&] { read_manifest(dir / "noletters.tsv"); }, "noletters.tsv:1: transcript has no letters");
  write_bytes(dir / "nopath.tsv", "\thello\n");
  expect_error([&] { read_manifest(dir / "nopath.tsv"); }, "empty audio path");
  write_bytes(dir / "empty.tsv", "# nothing\n\n");
  expect_error([&] { read_manifest(dir / "empty.tsv"); }, "no utterances");
  expect_error([&] { read_manifest(dir / "absent.tsv"); }, "cannot open");
  EXPECT_THROW(check_speech_source("manifest:" + (dir / "absent.tsv")), std::invalid_argument);
  EXPECT_THROW(check_speech_source("librispeech"), std::invalid_argument);
  EXPECT_THROW(check_speech_source("synthetic:0"), std::invalid_argument);
  EXPECT_NO_THROW(check_speech_source("synthetic"));
  EXPECT_NO_THROW(check_speech_source("synthetic:2"));
  EXPECT_NO_THROW(check_speech_source(dir / "notab.tsv"));
}

// ---------------------------------------------------------------- batches

// Ten tone clips of different lengths and transcripts.
std::vector<Utterance> tone_corpus(const TempDir& dir) {
  std::vector<Utterance> u;
  const std::vector<std::string> words = {"one", "two",   "three", "four", "five",
                                          "six", "seven", "eight", "nine", "ten"};
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string path = dir / (words[i] + ".wav");
    const int64_t n = 1600 * static_cast<int64_t>(10 - i) + 320;  // decreasing lengths
    write_wav(path, sine(200.0 + 100.0 * static_cast<double>(i), 16000, n), 16000);
    u.push_back({path, words[i]});
  }
  return u;
}

TEST(SpeechData, BatchesArePaddedTimeMajorFeaturesWithCtcTargets) {
  TempDir dir;
  const auto corpus = tone_corpus(dir);
  SpeechDataOptions o;
  o.heldout_fraction = 0.2;
  SpeechDataset ds(corpus, o, engine::Device::cpu());
  EXPECT_EQ(ds.train_size() + ds.heldout_size(), 10);
  EXPECT_GE(ds.heldout_size(), 1);
  // Deterministic split.
  SpeechDataset again(corpus, o, engine::Device::cpu());
  ASSERT_EQ(again.heldout_size(), ds.heldout_size());
  for (int64_t i = 0; i < ds.heldout_size(); ++i) {
    EXPECT_EQ(again.heldout_utterances()[static_cast<size_t>(i)].audio,
              ds.heldout_utterances()[static_cast<size_t>(i)].audio);
  }

  const SpeechBatch b = ds.next_train(3);
  EXPECT_EQ(b.samples, 3);
  ASSERT_EQ(b.features.dim(), 4);
  EXPECT_EQ(b.features.size(0), 3);
  EXPECT_EQ(b.features.size(1), 1);
  EXPECT_EQ(b.features.size(3), 161);
  EXPECT_EQ(b.features.category(), vocabulary::Category::inputs);
  EXPECT_EQ(b.targets.category(), vocabulary::Category::inputs);
  const auto lens = b.input_lengths.to_vector();
  // SortaGrad: the first epoch starts with the shortest clips, in order.
  EXPECT_LE(lens[0], lens[1]);
  EXPECT_LE(lens[1], lens[2]);
  EXPECT_EQ(b.features.size(2), static_cast<int64_t>(lens[2]));
  const auto x = b.features.to_vector();
  const int64_t t_max = b.features.size(2);
  for (int64_t i = 0; i < 3; ++i) {
    const auto li = static_cast<int64_t>(lens[static_cast<size_t>(i)]);
    const auto& u = *std::find_if(ds.train_utterances().begin(), ds.train_utterances().end(), [&](const Utterance& v) {
      return v.transcript == b.transcripts[static_cast<size_t>(i)];
    });
    EXPECT_EQ(ds.frames(u), li);
    const auto f = ds.features(u);
    ASSERT_EQ(static_cast<int64_t>(f->size()), li * 161);
    for (int64_t t = 0; t < t_max; ++t) {
      for (int64_t k = 0; k < 161; ++k) {
        const float got = x[static_cast<size_t>((i * t_max + t) * 161 + k)];
        ASSERT_EQ(got, t < li ? (*f)[static_cast<size_t>(t * 161 + k)] : 0.0f);
      }
    }
  }
  // Targets: the transcripts' labels, concatenated.
  std::vector<float> want, want_lens;
  for (const auto& t : b.transcripts) {
    for (int64_t l : encode_transcript(t)) want.push_back(static_cast<float>(l));
    want_lens.push_back(static_cast<float>(t.size()));
  }
  EXPECT_EQ(b.targets.to_vector(), want);
  EXPECT_EQ(b.target_lengths.to_vector(), want_lens);

  // Epochs run on; every training clip comes once per epoch.
  std::multiset<std::string> seen(b.transcripts.begin(), b.transcripts.end());
  while (static_cast<int64_t>(seen.size()) < ds.train_size()) {
    for (const auto& t : ds.next_train(1).transcripts) seen.insert(t);
  }
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size());
  EXPECT_EQ(ds.epoch(), 0);
  ds.next_train(1);
  EXPECT_EQ(ds.epoch(), 1);

  // Held-out batches, then the end.
  int64_t total = 0;
  for (int64_t i = 0;; ++i) {
    const SpeechBatch h = ds.heldout(i, 2);
    if (h.samples == 0) break;
    total += h.samples;
  }
  EXPECT_EQ(total, ds.heldout_size());
}

TEST(SpeechData, DatasetRejectsClipsShorterThanAFrame) {
  TempDir dir;
  write_wav(dir / "tiny.wav", std::vector<float>(100, 0.1f), 16000);
  expect_error(
      [&] {
        SpeechDataset({{dir / "tiny.wav", "a"}}, {}, engine::Device::cpu());
      },
      "shorter than one 20 ms frame");
}

// ---------------------------------------------------------------- espeak-ng

using ts::testing::EnvOverride;

TEST(SpeechData, SyntheticRequestsAreSeededPerPhrase) {
  const auto a = synthetic_requests({"hello", "world"}, 3, 7);
  const auto b = synthetic_requests({"new phrase", "hello", "world"}, 3, 7);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 9u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].voice, b[i + 3].voice);
    EXPECT_EQ(a[i].speed, b[i + 3].speed);
    EXPECT_EQ(a[i].pitch, b[i + 3].pitch);
  }
  for (const auto& r : a) {
    EXPECT_GE(r.speed, 120);
    EXPECT_LE(r.speed, 200);
    EXPECT_GE(r.pitch, 25);
    EXPECT_LE(r.pitch, 75);
  }
  EXPECT_GE(synthetic_phrases().size(), 50u);
  // Every letter and the apostrophe occur in the corpus.
  std::set<char> chars;
  for (const auto& p : synthetic_phrases()) chars.insert(p.begin(), p.end());
  for (char c : speech_alphabet().substr(1)) EXPECT_TRUE(chars.count(c)) << "'" << c << "'";
}

TEST(SpeechData, MissingEspeakNgSaysHowToInstall) {
  expect_error([] { find_espeak_ng("/nonexistent/espeak-ng"); }, "apt-get install espeak-ng");
}

TEST(SpeechData, EspeakNgSynthesisesAndCaches) {
  std::string exe;
  try {
    exe = find_espeak_ng();
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n(scripts/setup installs espeak-ng; CI runs it)";
  }
  TempDir cache;
  std::vector<SynthesisRequest> req = {
      {"seven", "en-us", 160, 50}, {"good morning", "en-gb+f2", 140, 70}, {"don't stop", "en-us+m3", 190, 30}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto u = synthesize_corpus(req, cache.path().string());
  const double first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(u.size(), 3u);
  for (size_t i = 0; i < u.size(); ++i) {
    SCOPED_TRACE(req[i].text);
    EXPECT_EQ(u[i].transcript, req[i].text);
    const Audio a = read_wav(u[i].audio);
    EXPECT_EQ(a.sample_rate, 16000);
    const double seconds = static_cast<double>(a.samples.size()) / 16000.0;
    EXPECT_GT(seconds, 0.2);
    EXPECT_LT(seconds, 3.0);
    double energy = 0;
    for (float v : a.samples) energy += double(v) * v;
    EXPECT_GT(std::sqrt(energy / static_cast<double>(a.samples.size())), 0.01);  // not silence
    EXPECT_GT(spectrogram_frames(static_cast<int64_t>(a.samples.size())),
              ctc_min_frames(encode_transcript(req[i].text)));
  }
  std::cout << "espeak-ng: " << first_s / 3 << " s per utterance (synthesis + resampling)\n";

  // Cached: a second run needs no espeak-ng at all.
  const auto mtime = fs::last_write_time(u[0].audio);
  std::optional<EnvOverride> no_espeak(std::in_place, "TS_ESPEAK_NG", "/nonexistent/espeak-ng");
  std::vector<Utterance> again;
  EXPECT_NO_THROW(again = synthesize_corpus(req, cache.path().string()));
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].audio, u[0].audio);
  EXPECT_EQ(fs::last_write_time(u[0].audio), mtime);
  // A changed request is new content: synthesised (and here, without espeak-ng, refused clearly).
  req[0].pitch = 51;
  expect_error([&] { synthesize_corpus(req, cache.path().string()); }, "apt-get install espeak-ng");
  no_espeak.reset();
  const auto changed = synthesize_corpus(req, cache.path().string());
  EXPECT_NE(changed[0].audio, u[0].audio);
  EXPECT_EQ(changed[1].audio, u[1].audio);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(cache.path())) files += e.path().extension() == ".wav" ? 1 : 0;
  EXPECT_EQ(files, 4u);  // no temporary files left behind

  // The words make a data set whose batches go through the spectrogram front end.
  SpeechDataOptions o;
  o.heldout_fraction = 0;
  SpeechDataset ds(changed, o, engine::Device::cpu());
  const SpeechBatch b = ds.next_train(3);
  EXPECT_EQ(b.samples, 3);
  EXPECT_GT(b.features.size(2), 20);
}

}  // namespace
}  // namespace ts::workloads
