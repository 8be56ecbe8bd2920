// linstate/algorithm.hpp — how a forward pass is computed: algorithms and SSE strategies.
#pragma once

namespace linstate {

//! Token by token (SPEC §2.1/§2.2): the decode form, and exact for every decay.
struct recurrent {
  static constexpr const char* name = "recurrent";
};

//! Chunk-parallel (SPEC §2.3): chunks of `ChunkSize` tokens, matrix products inside a chunk, state
//! passed between chunks, all exponents paired as e^{Γ_later − Γ_earlier} ≤ 1 (SPEC §8).
template <int ChunkSize = 64>
struct chunked {
  static_assert(ChunkSize >= 1 && ChunkSize <= 1024, "linstate: chunked<C> needs 1 <= C <= 1024 (64 is the default)");
  static constexpr int chunk_size = ChunkSize;
  static constexpr const char* name = "chunked";
};

//! Let the backend choose (CPU: recurrent when no sequence is longer than 64 tokens — decode and
//! short prefills — and chunked<64> otherwise).
struct automatic {
  static constexpr const char* name = "automatic";
};

//! SSE strategy "mask" (SPEC §4.5): every routed partition is computed on every token; an unselected
//! partition gets decay 1 and a zero write, which linstate implements by skipping it, so it stays
//! bit-identical.
struct mask {
  static constexpr bool gather = false;
  static constexpr const char* name = "mask";
};

//! SSE strategy "varlen" (SPEC §4.7): the tokens of each (sequence, partition) are gathered in time
//! order and run as their own sequence; outputs are scattered back and summed. With kw != kr a
//! token joins a partition's sequence if it writes or reads it.
struct varlen {
  static constexpr bool gather = true;
  static constexpr const char* name = "varlen";
};

template <class A>
inline constexpr bool is_algorithm_v = false;
template <>
inline constexpr bool is_algorithm_v<recurrent> = true;
template <int C>
inline constexpr bool is_algorithm_v<chunked<C>> = true;
template <>
inline constexpr bool is_algorithm_v<automatic> = true;

template <class S>
inline constexpr bool is_strategy_v = false;
template <>
inline constexpr bool is_strategy_v<mask> = true;
template <>
inline constexpr bool is_strategy_v<varlen> = true;

}  // namespace linstate
