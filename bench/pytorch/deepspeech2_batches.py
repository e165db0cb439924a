"""The batch shapes of trainscope's `deepspeech2` workload, recomputed in Python (no torch).

trainscope trains on the espeak-ng corpus of workloads/data/speech_data.{h,cpp}: every phrase of
synthetic_phrases() spoken 4 times ("synthetic"), with a voice, speed and pitch drawn per (phrase,
variant), stored as 16 kHz WAV files in the speech cache. A batch's shape (utterances, each one's
spectrogram frames and transcript length) depends only on which files it holds, so this module
replays the corpus recipe and the SpeechDataset batcher:

  requests   synthetic_requests(phrases, 4, seed 1): per phrase text and variant v,
             engine::Rng(fnv1a(text, 0x9e3779b97f4a7c15 + v + 1)) draws voice = voices[g % 10],
             speed = 120 + g % 81, pitch = 25 + g % 51 (g: successive std::mt19937_64 outputs).
  files      <cache>/hex64(fnv1a("v1|voice|speed|pitch|text")).wav; frames from the WAV header,
             T = 1 + (samples - 320) // 160.
  split      held out when fnv1a(file name + TAB + transcript) < int(0.1 * 2^64), in corpus order.
  batches    SpeechDataset(seed = --seed): epoch 0 in SortaGrad order (stable sort by frames),
             later epochs a Fisher-Yates shuffle from engine::Rng(seed * 0x2545f4914f6cdd1d + 7);
             a batch that runs past an epoch's end takes the rest from the next one.

The phrase and voice lists are read from workloads/data/speech_data.cpp (one source of truth);
the WAV files must exist: `trainscope run deepspeech2 ...` or deepspeech2_test synthesises them
on first use. The cache is $TS_SPEECH_CACHE, else $XDG_CACHE_HOME/trainscope/speech, else
~/.cache/trainscope/speech, as default_speech_cache_dir().
"""
import os
import re
import struct

import transformer_batches  # std::mt19937_64, as engine::Rng draws it

MASK64 = (1 << 64) - 1
FNV_OFFSET, FNV_PRIME = 1469598103934665603, 1099511628211
GOLDEN = 0x9E3779B97F4A7C15
SHUFFLE_MULT = 0x2545F4914F6CDD1D
CORPUS_SEED = 1  # load_speech_corpus's kCorpusSeed: the corpus is fixed; --seed only shuffles
VARIANTS = 4     # "synthetic"
HELDOUT_CUT = int(0.1 * 18446744073709551616.0)  # SpeechDataOptions.heldout_fraction, as C++ casts it
WINDOW, HOP = 320, 160
ALPHABET = "_ 'abcdefghijklmnopqrstuvwxyz"  # speech_alphabet(): blank, space, apostrophe, a-z

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "workloads", "data", "speech_data.cpp")


def fnv1a(s, h=FNV_OFFSET):
    for c in s.encode():
        h = ((h ^ c) * FNV_PRIME) & MASK64
    return h


def _string_list(source, opening):
    """The string literals of the C++ initializer list that follows `opening`."""
    start = source.index(opening) + len(opening)
    end = source.index("};", start)
    return re.findall(r'"((?:[^"\\]|\\.)*)"', source[start:end])


def phrases_and_voices(source_path=SOURCE):
    with open(source_path) as f:
        source = f.read()
    phrases = _string_list(source, "static const std::vector<std::string> phrases = {")
    voices = _string_list(source, "static const std::vector<std::string> voices = {")
    assert len(phrases) >= 50 and len(voices) >= 2, f"could not read the lists from {source_path}"
    return phrases, voices


def requests(phrases, voices, variants=VARIANTS, seed=CORPUS_SEED):
    """synthetic_requests(): (text, voice, speed, pitch) per phrase and variant. The phrases are
    already normalised transcripts (lower case, letters, apostrophes, single spaces)."""
    out = []
    for text in phrases:
        assert re.fullmatch(r"[a-z']+( [a-z']+)*", text), f"phrase {text!r} is not a normalised transcript"
        for v in range(variants):
            g = transformer_batches.integers(fnv1a(text, (seed * GOLDEN + v + 1) & MASK64), use_numpy=False)
            voice = voices[next(g) % len(voices)]
            speed = 120 + next(g) % 81
            pitch = 25 + next(g) % 51
            out.append((text, voice, speed, pitch))
    return out


def cache_dir():
    if os.environ.get("TS_SPEECH_CACHE"):
        return os.environ["TS_SPEECH_CACHE"]
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "trainscope", "speech")
    if os.environ.get("HOME"):
        return os.path.join(os.environ["HOME"], ".cache", "trainscope", "speech")
    return "/tmp/trainscope-speech"


def wav_samples(path):
    """Sample count of a 16-bit mono PCM WAV (what synthesize_corpus writes), from its header."""
    with open(path, "rb") as f:
        data = f.read(4096)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", f"{path}: not a WAV file"
    pos, rate, channels, bits = 12, None, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        if cid == b"fmt ":
            _, channels, rate, _, _, bits = struct.unpack("<HHIIHH", data[pos + 8:pos + 24])
        elif cid == b"data":
            if size in (0, 0xFFFFFFFF):
                size = os.path.getsize(path) - (pos + 8)
            assert rate == 16000 and channels == 1 and bits == 16, f"{path}: expected 16 kHz 16-bit mono"
            return size // 2
        pos += 8 + size + (size & 1)
    raise ValueError(f"{path}: no data chunk in the first 4 KiB")


def frames_of(samples):
    return 0 if samples < WINDOW else 1 + (samples - WINDOW) // HOP


def corpus(directory=None):
    """[(file name, transcript, frames)] in corpus order; raises FileNotFoundError, saying how to
    make the corpus, when a file is missing."""
    directory = directory or cache_dir()
    phrases, voices = phrases_and_voices()
    out = []
    for text, voice, speed, pitch in requests(phrases, voices):
        name = f"{fnv1a(f'v1|{voice}|{speed}|{pitch}|{text}'):016x}.wav"
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path} is missing: the espeak-ng corpus is made on first use by trainscope; run "
                "`trainscope run deepspeech2 --preset tiny --iters 1` (or deepspeech2_test) once")
        out.append((name, text, frames_of(wav_samples(path))))
    return out


def split(utterances):
    train, heldout = [], []
    for u in utterances:
        (heldout if fnv1a(u[0] + "\t" + u[1]) < HELDOUT_CUT else train).append(u)
    return train, heldout


def training_batches(batch, seed, count, directory=None):
    """The first `count` training batches of SpeechDataset(seed).next_train(batch): lists of
    (frames, transcript)."""
    train, _ = split(corpus(directory))
    assert train, "no training utterances"
    gen = transformer_batches.integers((seed * SHUFFLE_MULT + 7) & MASK64, use_numpy=False)
    order, cursor, epoch, out = [], 0, -1, []
    for _ in range(count):
        items = []
        while len(items) < batch:
            if epoch < 0 or cursor >= len(order):
                epoch += 1
                order = list(range(len(train)))
                if epoch == 0:
                    order.sort(key=lambda i: train[i][2])  # stable, as std::stable_sort
                else:
                    for i in range(len(order), 1, -1):
                        j = next(gen) % i
                        order[i - 1], order[j] = order[j], order[i - 1]
                cursor = 0
            u = train[order[cursor]]
            cursor += 1
            items.append((u[2], u[1]))
        out.append(items)
    return out


def labels(transcript):
    return [ALPHABET.index(ch) for ch in transcript]
