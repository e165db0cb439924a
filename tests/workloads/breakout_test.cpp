// a3c's Breakout: physics (walls, paddle angles, bricks), scoring, lives and the end of an
// episode, frame skip and the frame stack, determinism for a seed, no-op starts, rendering,
// and the PNG strip (decoded back with zlib).
#include "workloads/a3c/breakout.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <vector>

#include "workloads/a3c/png.h"

using namespace ts::workloads;

namespace {

BreakoutConfig quiet() {
  BreakoutConfig c = breakout_atari();
  c.noop_max = 0;  // tests place the ball themselves
  return c;
}

// Runs frames with `action` until the ball leaves play or `frames` pass; the points scored.
double run_frames(Breakout& g, int action, int frames) {
  double points = 0;
  for (int i = 0; i < frames && !g.over(); ++i) points += g.advance_frame(action);
  return points;
}

}  // namespace

TEST(Breakout, StartsWithAFullWallAndTheBallOutOfPlay) {
  Breakout g(quiet(), 1);
  EXPECT_EQ(g.bricks_left(), 6 * 18);
  EXPECT_EQ(g.lives(), 5);
  EXPECT_FALSE(g.ball().in_play);
  EXPECT_FALSE(g.over());
  // No-ops, moves and time do nothing to the ball until FIRE serves it, downwards.
  run_frames(g, Breakout::kNoop, 50);
  EXPECT_FALSE(g.ball().in_play);
  g.advance_frame(Breakout::kFire);
  ASSERT_TRUE(g.ball().in_play);
  EXPECT_GT(g.ball().vy, 0);
  EXPECT_GT(g.ball().y, 57 + 36);  // served below the wall
}

TEST(Breakout, BrickPointsByRow) {
  const BreakoutConfig c = breakout_atari();
  const std::vector<int> want = {7, 7, 4, 4, 1, 1};  // top row first
  for (int r = 0; r < 6; ++r) EXPECT_EQ(Breakout::brick_points(c, r), want[static_cast<size_t>(r)]) << r;
  BreakoutConfig two = c;
  two.brick_rows = 2;
  EXPECT_EQ(Breakout::brick_points(two, 0), 1);
  EXPECT_EQ(Breakout::brick_points(two, 1), 1);
}

TEST(Breakout, WallsReflectTheBall) {
  Breakout g(quiet(), 2);
  g.set_ball(9, 150, -2, 1);
  g.advance_frame(Breakout::kNoop);
  EXPECT_GT(g.ball().vx, 0);
  EXPECT_GE(g.ball().x, Breakout::kCourtLeft);
  g.set_ball(149, 150, 2, -1);
  g.advance_frame(Breakout::kNoop);
  EXPECT_LT(g.ball().vx, 0);
  EXPECT_LE(g.ball().x + g.config().ball_width, Breakout::kCourtRight);
  // The top wall, reached through a gap in the wall: the ball comes back down and the paddle
  // shrinks to half.
  g.set_ball(100, 33, 0.5f, -2);
  const float width = g.paddle_width();
  g.advance_frame(Breakout::kNoop);
  EXPECT_GT(g.ball().vy, 0);
  EXPECT_EQ(g.paddle_width(), width / 2);
}

TEST(Breakout, ThePaddleSendsTheBallBackAtAnAngleSetByWhereItHits) {
  for (float offset : {-7.0f, 0.0f, 7.0f}) {
    SCOPED_TRACE(offset);
    Breakout g(quiet(), 3);
    g.set_paddle(72);  // centre 80
    const float x = 80 + offset - g.config().ball_width / 2;
    g.set_ball(x, Breakout::kPaddleY - g.config().ball_height - 1, 0.0f, 2);
    run_frames(g, Breakout::kNoop, 2);
    EXPECT_LT(g.ball().vy, 0);
    if (offset < 0) {
      EXPECT_LT(g.ball().vx, 0);
    } else if (offset > 0) {
      EXPECT_GT(g.ball().vx, 0);
    }
    // Farther from the centre: flatter (15 degrees off vertical at the centre, 60 at the ends).
    const float angle = std::atan2(std::abs(g.ball().vx), -g.ball().vy) * 180 / 3.14159265f;
    EXPECT_GE(angle, 14.9f);
    EXPECT_LE(angle, 60.1f);
    if (offset == 0.0f) {
      EXPECT_NEAR(angle, 15, 0.5);
    } else {
      EXPECT_GT(angle, 45);
    }
  }
}

TEST(Breakout, BricksScoreTheirRowsPointsAndSendTheBallBack) {
  Breakout g(quiet(), 4);
  // Just below the bottom row (y 87..93), column 3, going up.
  g.set_ball(8 + 3 * 8 + 3, 94, 0, -2);
  const double points = run_frames(g, Breakout::kNoop, 1);
  EXPECT_EQ(points, 1);
  EXPECT_FALSE(g.brick(5, 3));
  EXPECT_EQ(g.bricks_left(), 6 * 18 - 1);
  EXPECT_GT(g.ball().vy, 0);
  EXPECT_EQ(g.score(), 1);
  // A red (top row) brick from above: 7 points, and the ball speeds up.
  const float speed_before = std::hypot(g.ball().vx, g.ball().vy);
  g.set_ball(8 + 10 * 8 + 3, 52, 0, speed_before);
  EXPECT_EQ(run_frames(g, Breakout::kNoop, 3), 7);
  EXPECT_FALSE(g.brick(0, 10));
  EXPECT_LT(g.ball().vy, 0);
  EXPECT_NEAR(std::hypot(g.ball().vx, g.ball().vy), 1.75f * g.config().ball_speed, 1e-4);
}

TEST(Breakout, MissingTheBallCostsALifeAndTheLastOneEndsTheEpisode) {
  BreakoutConfig c = quiet();
  c.lives = 2;
  Breakout g(c, 5);
  for (int life = 2; life >= 1; --life) {
    g.set_paddle(Breakout::kCourtLeft);
    g.set_ball(140, 170, 0, 3);
    run_frames(g, Breakout::kNoop, 20);
    EXPECT_EQ(g.lives(), life - 1);
    EXPECT_FALSE(g.ball().in_play);
  }
  EXPECT_TRUE(g.over());
  EXPECT_THROW(g.step(Breakout::kNoop), std::logic_error);
  EXPECT_THROW(g.advance_frame(Breakout::kNoop), std::logic_error);
  g.reset();
  EXPECT_FALSE(g.over());
  EXPECT_EQ(g.lives(), 2);
  EXPECT_EQ(g.score(), 0);
}

TEST(Breakout, StepsRepeatTheActionForTheFrameSkipAndReportLostLives) {
  BreakoutConfig c = quiet();
  c.lives = 1;
  Breakout g(c, 6);
  const float x0 = g.paddle_x();
  BreakoutStep s = g.step(Breakout::kRight);
  EXPECT_EQ(g.frames(), 4);
  EXPECT_EQ(g.steps(), 1);
  EXPECT_FLOAT_EQ(g.paddle_x(), x0 + 4 * c.paddle_speed);
  EXPECT_FALSE(s.terminal);
  g.set_paddle(Breakout::kCourtLeft);
  g.set_ball(140, 190, 0, 3);
  s = g.step(Breakout::kNoop);
  EXPECT_TRUE(s.life_lost);
  EXPECT_TRUE(s.terminal);
  EXPECT_THROW(g.step(7), std::logic_error);  // over already
  Breakout h(c, 6);
  EXPECT_THROW(h.step(4), std::invalid_argument);
}

TEST(Breakout, ClearingTheLastWallEndsTheEpisode) {
  BreakoutConfig c = quiet();
  c.brick_rows = 1;
  c.brick_columns = 1;  // one brick at x 8..16, y 57..63
  c.walls = 2;
  Breakout g(c, 7);
  g.set_ball(10, 64, 0, -2);
  EXPECT_EQ(run_frames(g, Breakout::kNoop, 1), 1);
  EXPECT_EQ(g.walls_cleared(), 1);
  EXPECT_FALSE(g.over());
  EXPECT_EQ(g.bricks_left(), 0);
  // The second wall appears once the ball is back on the paddle.
  g.set_paddle(Breakout::kCourtLeft);
  g.set_ball(10, Breakout::kPaddleY - 6, 0, 2);
  run_frames(g, Breakout::kNoop, 3);
  EXPECT_EQ(g.bricks_left(), 1);
  g.set_ball(10, 64, 0, -2);
  EXPECT_EQ(run_frames(g, Breakout::kNoop, 1), 1);
  EXPECT_TRUE(g.over());
  EXPECT_EQ(g.score(), 2);
}

TEST(Breakout, EpisodesAreCutAtTheFrameLimit) {
  BreakoutConfig c = quiet();
  c.max_frames = 40;
  Breakout g(c, 8);
  int steps = 0;
  while (!g.over()) {
    g.step(Breakout::kNoop);  // never serves: only the limit can end it
    ++steps;
  }
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(g.frames(), 40);
}

TEST(Breakout, SameSeedSameGameAndNoOpStartsDiffer) {
  BreakoutConfig c = breakout_atari();
  const auto play = [&](uint64_t seed) {
    Breakout g(c, seed);
    std::vector<uint8_t> trace;
    std::vector<double> rewards;
    int64_t start_frames = g.frames();
    ts::engine::Rng policy(99);
    for (int i = 0; i < 300 && !g.over(); ++i) {
      rewards.push_back(g.step(static_cast<int>(policy.integer(4))).reward);
      trace.insert(trace.end(), g.frame(3), g.frame(3) + Breakout::kFramePixels);
    }
    return std::make_tuple(trace, rewards, start_frames);
  };
  EXPECT_EQ(play(11), play(11));
  EXPECT_NE(std::get<0>(play(11)), std::get<0>(play(12)));
  // The no-op start: 0..30 steps of 4 frames, differing between seeds.
  std::set<int64_t> starts;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int64_t f = std::get<2>(play(seed));
    EXPECT_EQ(f % 4, 0);
    EXPECT_LE(f, 30 * 4);
    starts.insert(f);
  }
  EXPECT_GT(starts.size(), 5u);
}

TEST(Breakout, RendersTheCourtAt84x84AndStacksFramesOldestFirst) {
  Breakout g(quiet(), 9);
  std::vector<uint8_t> f(Breakout::kFramePixels);
  g.render(f.data());
  const auto at = [&](int x, int y) { return static_cast<int>(f[static_cast<size_t>(y * 84 + x)]); };
  EXPECT_EQ(at(42, 60), 0);    // empty court
  EXPECT_GT(at(2, 40), 100);   // the left wall
  EXPECT_GT(at(42, 11), 100);  // the top wall (y 24..32 -> rows 9.6..12.8)
  EXPECT_GT(at(42, 24), 50);   // a brick (rows 57..93 -> 22.8..37.2)
  const int paddle_row = static_cast<int>(Breakout::kPaddleY * 0.4f) + 1;
  const int paddle_col = static_cast<int>((g.paddle_x() + g.paddle_width() / 2) * 0.525f);
  EXPECT_GT(at(paddle_col, paddle_row), 50);
  EXPECT_EQ(at(5 + paddle_col, paddle_row - 6), 0);  // nothing above the paddle yet

  // The observation: oldest frame first, values in [0, 1].
  Breakout s(quiet(), 9);
  s.step(Breakout::kFire);
  std::vector<uint8_t> newest_before(s.frame(3), s.frame(3) + Breakout::kFramePixels);
  s.step(Breakout::kRight);
  EXPECT_EQ(std::vector<uint8_t>(s.frame(2), s.frame(2) + Breakout::kFramePixels), newest_before);
  std::vector<float> obs(4 * Breakout::kFramePixels);
  s.observation(obs.data());
  EXPECT_FLOAT_EQ(obs[3 * Breakout::kFramePixels + 84 * 11 + 42], static_cast<float>(s.frame(3)[84 * 11 + 42]) / 255);
  EXPECT_GE(*std::min_element(obs.begin(), obs.end()), 0.0f);
  EXPECT_LE(*std::max_element(obs.begin(), obs.end()), 1.0f);
  // The served ball shows up: the newest frame differs from a render without it.
  EXPECT_TRUE(s.ball().in_play);
}

TEST(Breakout, RandomPlayEndsAndScoresLittle) {
  const EpisodeFrames e = play_random_episode(breakout_atari(), 21, 22, 100000, 10);
  EXPECT_GT(e.steps, 50);
  EXPECT_LT(e.score, 60);  // random Atari Breakout scores about 1.7
  EXPECT_EQ(static_cast<int64_t>(e.frames.size()), 1 + e.steps / 10 + (e.steps % 10 != 0));
}

TEST(Breakout, EpisodeStripIsAValidPng) {
  const EpisodeFrames e = play_random_episode(breakout_atari(), 31, 32, 30, 3);
  int w = 0, h = 0;
  const std::vector<uint8_t> img = frame_grid(e.frames, 4, &w, &h);
  EXPECT_EQ(w, 4 * 86 + 2);
  EXPECT_EQ(h, 3 * 86 + 2);  // 11 frames, 4 to a row
  const std::vector<uint8_t> png = encode_png_gray(w, h, img);
  const uint8_t sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  ASSERT_GT(png.size(), 8u + 25 + 12 + 12);
  EXPECT_EQ(std::memcmp(png.data(), sig, 8), 0);
  const auto be32 = [&](size_t at) {
    return (uint32_t{png[at]} << 24) | (uint32_t{png[at + 1]} << 16) | (uint32_t{png[at + 2]} << 8) | png[at + 3];
  };
  // IHDR: width, height, 8-bit grayscale; its CRC over type + data.
  EXPECT_EQ(std::memcmp(png.data() + 12, "IHDR", 4), 0);
  EXPECT_EQ(be32(16), static_cast<uint32_t>(w));
  EXPECT_EQ(be32(20), static_cast<uint32_t>(h));
  EXPECT_EQ(png[24], 8);
  EXPECT_EQ(png[25], 0);
  EXPECT_EQ(be32(29), static_cast<uint32_t>(crc32(0, png.data() + 12, 17)));
  // IDAT inflates to the rows, each behind filter byte 0.
  const size_t idat = 33;
  const uint32_t len = be32(idat);
  ASSERT_EQ(std::memcmp(png.data() + idat + 4, "IDAT", 4), 0);
  std::vector<uint8_t> raw(static_cast<size_t>((w + 1) * h));
  uLongf raw_len = static_cast<uLongf>(raw.size());
  ASSERT_EQ(uncompress(raw.data(), &raw_len, png.data() + idat + 8, len), Z_OK);
  ASSERT_EQ(raw_len, raw.size());
  for (int y = 0; y < h; ++y) {
    ASSERT_EQ(raw[static_cast<size_t>(y * (w + 1))], 0);
    ASSERT_EQ(std::memcmp(raw.data() + y * (w + 1) + 1, img.data() + y * w, static_cast<size_t>(w)), 0) << y;
  }
  EXPECT_EQ(std::memcmp(png.data() + png.size() - 8, "IEND", 4), 0);

  const auto path = std::filesystem::temp_directory_path() / "breakout_test_strip.png";
  write_png_gray(path, w, h, img);
  EXPECT_EQ(std::filesystem::file_size(path), png.size());
  std::filesystem::remove(path);
  EXPECT_THROW(encode_png_gray(3, 3, std::vector<uint8_t>(8)), std::invalid_argument);
  EXPECT_THROW(write_png_gray("/nonexistent-dir/x.png", w, h, img), std::runtime_error);
}
