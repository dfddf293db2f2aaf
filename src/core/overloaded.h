// Overloaded{lambdas...}: one visitor for std::visit out of one lambda per alternative.
#pragma once

namespace zerodp {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace zerodp
