#pragma once
// A native Breakout for the a3c workload: plays like Atari 2600 Breakout (a paddle, a ball,
// rows of bricks worth 1/4/7 points, five lives, a second wall after the first is cleared,
// the ball served with FIRE and speeding up) without an emulator or ROMs. The agent sees what
// DQN and A3C saw: 84x84 grayscale frames, the action repeated for 4 frames (rewards summed),
// the last 4 frames stacked, and a random number of no-op steps at the start of an episode.
// Everything is deterministic for a seed. Rules and coordinates: docs/workloads.md "## a3c".
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/random.h"

namespace ts::workloads {

struct BreakoutConfig {
  // The wall: rows counted from the top; the bottom two rows score 1, the next two 4, the rest 7.
  int brick_rows = 6;
  int brick_columns = 18;                 // 8 game pixels wide each: the 144-pixel court
  int wall_top = 57;                      // y of the top row (rows are 6 pixels high)
  int paddle_width = 16;                  // game pixels (the court is 144 wide)
  bool shrink_paddle = true;              // halved once the ball has reached the top wall, as on the Atari
  float paddle_speed = 3.0f;              // pixels per frame
  float ball_speed = 2.0f;                // pixels per frame when served
  float ball_width = 2, ball_height = 4;  // game pixels (the Atari's: about 1 x 1.6 at 84x84)
  bool speed_up = true;                   // x1.25 after 4 paddle hits, x1.5 after 12, x1.75 after a top-two-row brick
  int lives = 5;
  bool auto_serve = false;      // a new ball comes without FIRE (an easier game)
  int walls = 2;                // a cleared wall is replaced until this many have been cleared
  int frame_skip = 4;           // frames per agent step, the action repeated, rewards summed
  int noop_max = 30;            // reset() takes 0..noop_max no-op steps
  int64_t max_frames = 108000;  // episode cut (ALE's 30 minutes at 60 frames/s)
};

// The A3C paper's setting (DQN's preprocessing on the Atari game).
BreakoutConfig breakout_atari();

struct BreakoutStep {
  double reward = 0;      // points scored during the step's frames
  bool terminal = false;  // no lives left, every wall cleared, or the frame limit reached
  bool life_lost = false;
};

class Breakout {
 public:
  // ALE's minimal action set for Breakout, in its order.
  enum Action : int { kNoop = 0, kFire = 1, kRight = 2, kLeft = 3 };
  static constexpr int kActions = 4;
  static constexpr int kSize = 84;  // observation side
  static constexpr int kStack = 4;  // frames per observation
  static constexpr int kFramePixels = kSize * kSize;
  // Game coordinates, as the Atari screen: 160 x 210, the court between walls.
  static constexpr float kWidth = 160, kHeight = 210;
  static constexpr float kCourtLeft = 8, kCourtRight = 152, kCourtTop = 32;
  static constexpr float kPaddleY = 189, kPaddleHeight = 4;
  static constexpr float kBrickWidth = 8, kBrickHeight = 6;

  struct Ball {
    float x = 0, y = 0;    // top-left corner
    float vx = 0, vy = 0;  // pixels per frame
    bool in_play = false;
  };

  Breakout(const BreakoutConfig& config, uint64_t seed);

  // A new episode: a fresh wall and lives, then 0..noop_max random no-op steps (which change
  // where and how the first ball is served: the game draws a random number every frame).
  void reset();
  // One agent step: `action` repeated for frame_skip frames. The episode must not be over.
  BreakoutStep step(int action);
  // One frame, without rendering (tests, and step()'s inner loop). Returns the points scored.
  double advance_frame(int action);

  // The observation: the last kStack frames, oldest first, as floats in [0, 1]: kStack x 84 x 84.
  void observation(float* out) const;
  const uint8_t* frame(int k) const;  // k-th frame of the stack, 0 = oldest
  // Renders the current state (84 x 84, row-major) into `out`.
  void render(uint8_t* out) const;

  bool over() const { return over_; }
  int lives() const { return lives_; }
  double score() const { return score_; }     // this episode's points
  int64_t frames() const { return frames_; }  // this episode's frames, no-op start included
  int64_t steps() const { return steps_; }    // this episode's agent steps after the no-op start
  int bricks_left() const;
  int walls_cleared() const { return walls_cleared_; }
  float paddle_x() const { return paddle_x_; }  // left edge
  float paddle_width() const { return paddle_w_; }
  const Ball& ball() const { return ball_; }
  const BreakoutConfig& config() const { return cfg_; }
  bool brick(int row, int column) const { return bricks_[static_cast<size_t>(row * cfg_.brick_columns + column)]; }
  static int brick_points(const BreakoutConfig& c, int row);

  // For tests and tools: put the ball or the paddle somewhere (the ball is put in play).
  void set_ball(float x, float y, float vx, float vy);
  void set_paddle(float x);

 private:
  void new_wall();
  void serve();
  void push_frame();
  float speed() const;
  bool overlaps_paddle() const;
  double hit_bricks();

  BreakoutConfig cfg_;
  engine::Rng rng_;
  std::vector<bool> bricks_;
  Ball ball_;
  float paddle_x_ = 0, paddle_w_ = 0;
  int lives_ = 0, walls_cleared_ = 0, paddle_hits_ = 0;
  bool top_reached_ = false, top_rows_hit_ = false, over_ = true, starting_ = false;
  double score_ = 0;
  int64_t frames_ = 0, steps_ = 0;
  std::array<std::vector<uint8_t>, kStack> stack_;
  int newest_ = 0;  // index in stack_ of the newest frame
};

// Plays one episode (from reset(), with the game seeded by `seed`) with uniformly random
// actions drawn from `policy_seed`, keeping every `every`-th observed frame, at most
// `max_steps` steps. For looking at the game (trainscope play).
struct EpisodeFrames {
  std::vector<std::vector<uint8_t>> frames;  // 84 x 84 each
  double score = 0;
  int64_t steps = 0;
};
EpisodeFrames play_random_episode(const BreakoutConfig& config, uint64_t seed, uint64_t policy_seed, int64_t max_steps,
                                  int64_t every);

// Frames (84 x 84 each) laid out left to right, `per_row` to a row, with a 2-pixel gray gap:
// an 8-bit grayscale image of *width x *height.
std::vector<uint8_t> frame_grid(const std::vector<std::vector<uint8_t>>& frames, int per_row, int* width, int* height);

}  // namespace ts::workloads
