// How a model uses its flat parameter units, in terms that name no architecture: the engine (zero/)
// sees a micro-step as a fixed sequence of unit uses, each a forward or backward pass over one unit,
// and derives from that sequence alone when to gather, free and reduce (FSDP2's view of a module
// tree, flattened to the order the units run in).
//
// A use is announced by its index in the schedule: units.begin(k) before the model touches unit
// schedule[k].unit, units.end(k) after. params(unit) is valid between them when the use reads
// parameters, grads(unit) when it is a backward use. Every backward ACCUMULATES into the unit's
// gradient buffer (the caller zeroes it), so micro-steps of gradient accumulation simply run forward
// and backward again; except that a runner may leave a buffer unzeroed and say so (grads_fresh): then
// the unit's first backward use writes all of it (PyTorch's set_to_none, without the extra pass).
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zerodp::model {

enum class Pass : uint8_t { kForward, kBackward };

struct UnitUse {
  int unit = 0;
  Pass pass = Pass::kForward;
  bool reads_params = true;  // false for a backward that only adds into the gradient (the embedding's)
  std::string_view part;     // what the use is ("embed", "block", "head"), for messages and tests
};

// One micro-step's uses: the forward's first, then the backward's. Every unit is used at least once
// forward and once backward. What the engine needs to know of the order is derived once, here.
class UnitSchedule {
 public:
  UnitSchedule() = default;
  // Checks the order (forward uses before backward ones, units in [0, num_units), each unit used in
  // both passes) and derives the rest.
  UnitSchedule(std::vector<UnitUse> uses, int num_units);

  int size() const { return static_cast<int>(uses_.size()); }
  const UnitUse& operator[](int use) const { return uses_.at(static_cast<size_t>(use)); }
  const std::vector<UnitUse>& uses() const { return uses_; }
  int forward_uses() const { return forward_uses_; }

  // The unit's next use is the very next one (the head's forward before its backward): its gathered
  // parameters stay.
  bool next_use_follows(int use) const { return flags_.at(static_cast<size_t>(use)) & kNextFollows; }
  // No later use of this micro-step reads the unit's parameters.
  bool last_param_read(int use) const { return flags_.at(static_cast<size_t>(use)) & kLastParamRead; }
  // The unit's last backward use: its gradient of the micro-step is complete after it.
  bool completes_gradient(int use) const { return flags_.at(static_cast<size_t>(use)) & kCompletesGradient; }

  // The units of the uses that read parameters, in order (what a stage-3 prefetcher walks), and the
  // position of a reading use among them.
  const std::vector<int>& param_reads() const { return param_reads_; }
  int param_read_index(int use) const { return param_read_index_.at(static_cast<size_t>(use)); }
  // How many of param_reads() belong to the forward.
  int forward_param_reads() const { return forward_param_reads_; }

 private:
  enum : uint8_t { kNextFollows = 1, kLastParamRead = 2, kCompletesGradient = 4 };
  std::vector<UnitUse> uses_;
  std::vector<uint8_t> flags_;
  std::vector<int> param_reads_, param_read_index_;
  int forward_uses_ = 0, forward_param_reads_ = 0;
};

// The type gradients accumulate in for a model computing on P: fp32, and double for the double
// models of the gradient checks.
template <typename P>
using GradOf = std::conditional_t<std::is_same_v<P, double>, double, float>;

// What the model asks of its runner: begin(use) before schedule[use] runs, end(use) after.
template <typename P>
class UnitAccess {
 public:
  using Grad = GradOf<P>;
  virtual ~UnitAccess() = default;
  virtual void begin(int use) {}
  virtual void end(int use) {}
  virtual const P* params(int unit) = 0;
  virtual Grad* grads(int unit) = 0;
  // Whether the unit's gradient buffer holds no values yet at the backward use that has just begun (a
  // runner that skips zeroing it; only ever at a unit's first backward use of a micro-step). Then that
  // use writes every element of the unit's gradient: its GEMMs write their weights' gradients
  // (kernels::WeightGrad::kWrite) and the model zeroes the unit's other tensors before adding into them.
  // The bits are those of adding into zeros.
  virtual bool grads_fresh(int unit) { return false; }
};

// The simplest runner: all parameters and gradients of all units resident (one rank, stage 0).
template <typename P>
class ResidentUnits : public UnitAccess<P> {
 public:
  using Grad = GradOf<P>;
  ResidentUnits(std::vector<const P*> params, std::vector<Grad*> grads)
      : params_(std::move(params)), grads_(std::move(grads)) {}
  const P* params(int unit) override { return params_.at(static_cast<size_t>(unit)); }
  Grad* grads(int unit) override { return grads_.at(static_cast<size_t>(unit)); }

 private:
  std::vector<const P*> params_;
  std::vector<Grad*> grads_;
};

}  // namespace zerodp::model
