#pragma once
// DCP_DETAIL_MEMBER_PROBE(name) defines the concept dcp::detail::declares_<name><T>: whether the
// class T declares a member called `name` at all — a function of any signature, an overload
// set, a template, a data member, static or not, of any access. The concepts use it so that an
// optional member with the wrong signature is an unsatisfied constraint (a compile error that
// names it) instead of a member silently ignored.
//
// Detection by ambiguity: member_probe_<name><T> inherits `name` from T and from a base that
// surely has it, so naming it through the probe is ambiguous exactly when T declares it too. A
// final class cannot be derived from; for it, only a single non-overloaded member is detected.

#include <type_traits>

#include "dcp/config.hpp"

#define DCP_DETAIL_MEMBER_PROBE(name)                          \
  struct member_probe_base_##name {                            \
    int name;                                                  \
  };                                                           \
  template <class T>                                           \
  struct member_probe_##name : T, member_probe_base_##name {}; \
  template <class T>                                           \
  concept declares_##name =                                    \
      std::is_class_v<T> &&                                    \
      ((std::is_final_v<T> && requires { &T::name; }) ||       \
       (!std::is_final_v<T> && !requires { &member_probe_##name<T>::name; }))
