#include "workloads/a3c/breakout.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ts::workloads {

namespace {

constexpr float kPi = 3.14159265358979f;
constexpr float kWallTopY = 24;      // the top wall is the band [24, 32)
constexpr float kWallBottomY = 196;  // the side walls end here
constexpr float kBallLostY = Breakout::kPaddleY + Breakout::kPaddleHeight + 3;

// ALE's NTSC colours of Breakout through ITU-R 601 luma (what DQN's grayscale conversion gives).
constexpr float kWallGray = 142;
constexpr float kPaddleGray = 110;  // the paddle and the ball: (200, 72, 72)
// Brick rows from the bottom: blue, aqua, green, yellow, orange, red.
constexpr float kRowGray[] = {85, 124, 148, 131, 129, 110};

}  // namespace

BreakoutConfig breakout_atari() { return BreakoutConfig{}; }

int Breakout::brick_points(const BreakoutConfig& c, int row) {
  const int from_bottom = c.brick_rows - 1 - row;
  return from_bottom < 2 ? 1 : from_bottom < 4 ? 4 : 7;
}

Breakout::Breakout(const BreakoutConfig& config, uint64_t seed) : cfg_(config), rng_(seed) {
  if (cfg_.brick_rows < 1 || cfg_.brick_columns < 1 ||
      static_cast<float>(cfg_.brick_columns) * kBrickWidth > kCourtRight - kCourtLeft + 0.5f) {
    throw std::invalid_argument("breakout: the wall must have 1..18 columns and at least one row");
  }
  if (static_cast<float>(cfg_.wall_top) < kCourtTop ||
      static_cast<float>(cfg_.wall_top + cfg_.brick_rows * 6) > kPaddleY - 40) {
    throw std::invalid_argument("breakout: the wall must lie between the top wall and the paddle");
  }
  if (cfg_.paddle_width < 2 || static_cast<float>(cfg_.paddle_width) > kCourtRight - kCourtLeft ||
      cfg_.paddle_speed <= 0 || cfg_.ball_speed <= 0 || cfg_.ball_speed > 8) {
    throw std::invalid_argument("breakout: paddle width in [2, 144], positive paddle speed, ball speed in (0, 8]");
  }
  if (!(cfg_.ball_width >= 1 && cfg_.ball_width <= 8 && cfg_.ball_height >= 1 && cfg_.ball_height <= 8)) {
    throw std::invalid_argument("breakout: the ball's sides must be in [1, 8] game pixels");
  }
  if (cfg_.lives < 1 || cfg_.walls < 1 || cfg_.frame_skip < 1 || cfg_.noop_max < 0 || cfg_.max_frames < 1) {
    throw std::invalid_argument("breakout: lives, walls, frame skip and frame limit must be positive");
  }
  for (auto& f : stack_) f.assign(kFramePixels, 0);
  bricks_.assign(static_cast<size_t>(cfg_.brick_rows * cfg_.brick_columns), true);
  reset();
}

void Breakout::new_wall() { std::fill(bricks_.begin(), bricks_.end(), true); }

int Breakout::bricks_left() const { return static_cast<int>(std::count(bricks_.begin(), bricks_.end(), true)); }

void Breakout::reset() {
  over_ = false;
  lives_ = cfg_.lives;
  score_ = 0;
  frames_ = 0;
  steps_ = 0;
  walls_cleared_ = 0;
  new_wall();
  paddle_w_ = static_cast<float>(cfg_.paddle_width);
  paddle_x_ = (kCourtLeft + kCourtRight - paddle_w_) / 2;
  ball_ = Ball{};
  top_reached_ = top_rows_hit_ = false;
  paddle_hits_ = 0;
  const int64_t noops = rng_.integer(cfg_.noop_max + 1);
  starting_ = true;  // no serve during the no-op start, even with auto_serve
  for (int64_t i = 0; i < noops * cfg_.frame_skip && !over_; ++i) advance_frame(kNoop);
  starting_ = false;
  std::vector<uint8_t> first(kFramePixels);
  render(first.data());
  for (auto& f : stack_) f = first;
  newest_ = kStack - 1;
}

float Breakout::speed() const {
  if (!cfg_.speed_up) return cfg_.ball_speed;
  float f = 1;
  if (paddle_hits_ >= 4) f = 1.25f;
  if (paddle_hits_ >= 12) f = 1.5f;
  if (top_rows_hit_) f = 1.75f;
  return cfg_.ball_speed * f;
}

void Breakout::serve() {
  // From just below the wall, downwards, 20-45 degrees off vertical either way.
  ball_.in_play = true;
  ball_.x = kCourtLeft + static_cast<float>(rng_.uniform()) * (kCourtRight - kCourtLeft - cfg_.ball_width);
  ball_.y = static_cast<float>(cfg_.wall_top + cfg_.brick_rows * 6) + 12;
  const float angle = (20 + 25 * static_cast<float>(rng_.uniform())) * kPi / 180;
  const float side = rng_.uniform() < 0.5 ? -1.0f : 1.0f;
  paddle_hits_ = 0;
  top_rows_hit_ = false;
  const float s = speed();
  ball_.vx = side * s * std::sin(angle);
  ball_.vy = s * std::cos(angle);
}

void Breakout::set_ball(float x, float y, float vx, float vy) { ball_ = Ball{x, y, vx, vy, true}; }

void Breakout::set_paddle(float x) { paddle_x_ = std::clamp(x, kCourtLeft, kCourtRight - paddle_w_); }

bool Breakout::overlaps_paddle() const {
  return ball_.x < paddle_x_ + paddle_w_ && ball_.x + cfg_.ball_width > paddle_x_ &&
         ball_.y < kPaddleY + kPaddleHeight && ball_.y + cfg_.ball_height > kPaddleY;
}

// Removes every brick the ball overlaps (one or, at a seam, two to four) and returns their points.
double Breakout::hit_bricks() {
  const float top = static_cast<float>(cfg_.wall_top);
  const float bottom = top + static_cast<float>(cfg_.brick_rows) * kBrickHeight;
  if (ball_.y + cfg_.ball_height <= top || ball_.y >= bottom) return 0;
  const int r0 = std::max(0, static_cast<int>(std::floor((ball_.y - top) / kBrickHeight)));
  const int r1 = std::min(cfg_.brick_rows - 1,
                          static_cast<int>(std::floor((ball_.y + cfg_.ball_height - 1e-3f - top) / kBrickHeight)));
  const int c0 = std::max(0, static_cast<int>(std::floor((ball_.x - kCourtLeft) / kBrickWidth)));
  const int c1 = std::min(cfg_.brick_columns - 1,
                          static_cast<int>(std::floor((ball_.x + cfg_.ball_width - 1e-3f - kCourtLeft) / kBrickWidth)));
  double points = 0;
  for (int r = r0; r <= r1; ++r) {
    for (int c = c0; c <= c1; ++c) {
      const auto i = static_cast<size_t>(r * cfg_.brick_columns + c);
      if (!bricks_[i]) continue;
      bricks_[i] = false;
      points += brick_points(cfg_, r);
      if (brick_points(cfg_, r) == 7) top_rows_hit_ = true;
    }
  }
  return points;
}

double Breakout::advance_frame(int action) {
  if (over_) throw std::logic_error("breakout: the episode is over (call reset())");
  if (action < 0 || action >= kActions) throw std::invalid_argument("breakout: action must be in [0, 4)");
  rng_.next();  // the console's per-frame randomness: no-op starts change what comes next
  ++frames_;
  if (action == kRight) paddle_x_ += cfg_.paddle_speed;
  if (action == kLeft) paddle_x_ -= cfg_.paddle_speed;
  paddle_x_ = std::clamp(paddle_x_, kCourtLeft, kCourtRight - paddle_w_);

  double points = 0;
  if (!ball_.in_play) {
    if (action == kFire || (cfg_.auto_serve && !starting_)) serve();
  } else {
    // Sub-steps of at most one pixel: nothing is thinner than the ball, so nothing is skipped.
    const int n = std::max(1, static_cast<int>(std::ceil(std::max(std::abs(ball_.vx), std::abs(ball_.vy)))));
    for (int i = 0; i < n; ++i) {
      const float inv = 1.0f / static_cast<float>(n);
      ball_.x += ball_.vx * inv;
      ball_.y += ball_.vy * inv;
      if (ball_.x < kCourtLeft) {
        ball_.x = 2 * kCourtLeft - ball_.x;
        ball_.vx = std::abs(ball_.vx);
      }
      if (ball_.x + cfg_.ball_width > kCourtRight) {
        ball_.x = 2 * (kCourtRight - cfg_.ball_width) - ball_.x;
        ball_.vx = -std::abs(ball_.vx);
      }
      if (ball_.y < kCourtTop) {
        ball_.y = 2 * kCourtTop - ball_.y;
        ball_.vy = std::abs(ball_.vy);
        if (cfg_.shrink_paddle && !top_reached_) {
          const float centre = paddle_x_ + paddle_w_ / 2;
          paddle_w_ = std::max(2.0f, std::round(static_cast<float>(cfg_.paddle_width) / 2));
          set_paddle(centre - paddle_w_ / 2);
        }
        top_reached_ = true;
      }
      const double p = hit_bricks();
      if (p > 0) {
        points += p;
        // Bricks send the ball back vertically (as the Atari's do), at the current speed.
        const float s = speed() / std::hypot(ball_.vx, ball_.vy);
        ball_.vx *= s;
        ball_.vy = -ball_.vy * s;
      }
      if (ball_.vy > 0 && overlaps_paddle()) {
        ++paddle_hits_;
        if (bricks_left() == 0) new_wall();  // the next wall appears once the ball is back down
        // Where the ball meets the paddle sets the angle, 15 to 60 degrees off vertical: the
        // agent aims by meeting the ball off-centre.
        const float half = paddle_w_ / 2 + cfg_.ball_width / 2;
        const float offset =
            std::clamp((ball_.x + cfg_.ball_width / 2 - (paddle_x_ + paddle_w_ / 2)) / half, -1.0f, 1.0f);
        const float side = std::abs(offset) < 1e-3f ? (ball_.vx < 0 ? -1.0f : 1.0f) : (offset < 0 ? -1.0f : 1.0f);
        const float angle = (15 + 45 * std::abs(offset)) * kPi / 180;
        const float s = speed();
        ball_.vx = side * s * std::sin(angle);
        ball_.vy = -s * std::cos(angle);
        ball_.y = kPaddleY - cfg_.ball_height;
      }
      if (ball_.y > kBallLostY) {
        ball_.in_play = false;
        --lives_;
        top_reached_ = false;
        paddle_w_ = static_cast<float>(cfg_.paddle_width);  // a new ball gets the full paddle back
        set_paddle(paddle_x_);
        if (lives_ == 0) over_ = true;
        break;
      }
    }
    if (bricks_left() == 0 && points > 0) {
      ++walls_cleared_;
      if (walls_cleared_ >= cfg_.walls) over_ = true;
    }
  }
  score_ += points;
  if (frames_ >= cfg_.max_frames) over_ = true;
  return points;
}

BreakoutStep Breakout::step(int action) {
  if (over_) throw std::logic_error("breakout: the episode is over (call reset())");
  BreakoutStep r;
  const int lives_before = lives_;
  for (int f = 0; f < cfg_.frame_skip && !over_; ++f) r.reward += advance_frame(action);
  ++steps_;
  r.life_lost = lives_ < lives_before;
  r.terminal = over_;
  push_frame();
  return r;
}

void Breakout::push_frame() {
  newest_ = (newest_ + 1) % kStack;
  render(stack_[static_cast<size_t>(newest_)].data());
}

const uint8_t* Breakout::frame(int k) const {
  if (k < 0 || k >= kStack) throw std::out_of_range("breakout: frame index out of the stack");
  return stack_[static_cast<size_t>((newest_ + 1 + k) % kStack)].data();
}

void Breakout::observation(float* out) const {
  for (int k = 0; k < kStack; ++k) {
    const uint8_t* f = frame(k);
    float* o = out + static_cast<size_t>(k) * kFramePixels;
    for (int i = 0; i < kFramePixels; ++i) o[i] = static_cast<float>(f[i]) * (1.0f / 255.0f);
  }
}

void Breakout::render(uint8_t* out) const {
  // Each rectangle adds its exact area coverage of every 84x84 pixel: the same as drawing at
  // 160x210 and resizing with area averaging, without the 160x210 frame.
  std::array<float, kFramePixels> acc{};
  constexpr float sx = kSize / kWidth, sy = kSize / kHeight;
  const auto rect = [&](float x0, float y0, float x1, float y1, float gray) {
    const float X0 = x0 * sx, X1 = x1 * sx, Y0 = y0 * sy, Y1 = y1 * sy;
    const int px0 = std::max(0, static_cast<int>(std::floor(X0))),
              px1 = std::min(kSize, static_cast<int>(std::ceil(X1)));
    const int py0 = std::max(0, static_cast<int>(std::floor(Y0))),
              py1 = std::min(kSize, static_cast<int>(std::ceil(Y1)));
    for (int py = py0; py < py1; ++py) {
      const float cy = std::min(Y1, static_cast<float>(py + 1)) - std::max(Y0, static_cast<float>(py));
      for (int px = px0; px < px1; ++px) {
        const float cx = std::min(X1, static_cast<float>(px + 1)) - std::max(X0, static_cast<float>(px));
        acc[static_cast<size_t>(py * kSize + px)] += cx * cy * gray;
      }
    }
  };
  rect(0, kWallTopY, kWidth, kCourtTop, kWallGray);
  rect(0, kCourtTop, kCourtLeft, kWallBottomY, kWallGray);
  rect(kCourtRight, kCourtTop, kWidth, kWallBottomY, kWallGray);
  for (int r = 0; r < cfg_.brick_rows; ++r) {
    const int from_bottom = std::min(5, cfg_.brick_rows - 1 - r);
    const float y = static_cast<float>(cfg_.wall_top) + static_cast<float>(r) * kBrickHeight;
    for (int c = 0; c < cfg_.brick_columns; ++c) {
      if (!brick(r, c)) continue;
      const float x = kCourtLeft + static_cast<float>(c) * kBrickWidth;
      rect(x, y, x + kBrickWidth, y + kBrickHeight, kRowGray[from_bottom]);
    }
  }
  rect(paddle_x_, kPaddleY, paddle_x_ + paddle_w_, kPaddleY + kPaddleHeight, kPaddleGray);
  if (ball_.in_play) rect(ball_.x, ball_.y, ball_.x + cfg_.ball_width, ball_.y + cfg_.ball_height, kPaddleGray);
  for (int i = 0; i < kFramePixels; ++i) {
    out[i] = static_cast<uint8_t>(std::clamp(std::lround(acc[static_cast<size_t>(i)]), 0L, 255L));
  }
}

EpisodeFrames play_random_episode(const BreakoutConfig& config, uint64_t seed, uint64_t policy_seed, int64_t max_steps,
                                  int64_t every) {
  if (every < 1 || max_steps < 1)
    throw std::invalid_argument("play_random_episode: every and max_steps must be positive");
  Breakout game(config, seed);
  engine::Rng policy(policy_seed);
  EpisodeFrames e;
  const auto keep = [&] {
    const uint8_t* f = game.frame(Breakout::kStack - 1);
    e.frames.emplace_back(f, f + Breakout::kFramePixels);
  };
  keep();
  while (!game.over() && e.steps < max_steps) {
    game.step(static_cast<int>(policy.integer(Breakout::kActions)));
    ++e.steps;
    if (e.steps % every == 0 || game.over()) keep();
  }
  e.score = game.score();
  return e;
}

std::vector<uint8_t> frame_grid(const std::vector<std::vector<uint8_t>>& frames, int per_row, int* width, int* height) {
  if (frames.empty() || per_row < 1) throw std::invalid_argument("frame_grid: needs frames and per_row >= 1");
  constexpr int kGap = 2, kCell = Breakout::kSize + kGap;
  const int n = static_cast<int>(frames.size());
  const int cols = std::min(per_row, n), rows = (n + cols - 1) / cols;
  const int w = cols * kCell + kGap, h = rows * kCell + kGap;
  std::vector<uint8_t> img(static_cast<size_t>(w) * static_cast<size_t>(h), 64);
  for (int i = 0; i < n; ++i) {
    if (frames[static_cast<size_t>(i)].size() != static_cast<size_t>(Breakout::kFramePixels)) {
      throw std::invalid_argument("frame_grid: frames must be 84x84");
    }
    const int x0 = kGap + (i % cols) * kCell, y0 = kGap + (i / cols) * kCell;
    for (int y = 0; y < Breakout::kSize; ++y) {
      std::copy_n(frames[static_cast<size_t>(i)].data() + y * Breakout::kSize, Breakout::kSize,
                  img.data() + static_cast<size_t>(y0 + y) * static_cast<size_t>(w) + x0);
    }
  }
  *width = w;
  *height = h;
  return img;
}

}  // namespace ts::workloads
