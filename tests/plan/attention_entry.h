// One attention entry of the planner's op list for the attention-rate tests
// (test_plan_attention_backward, test_plan_triton_attention): B = 2, T =
// 2048, Cl = 256 over 4 heads, in pass `phase`.
#pragma once
#include "tessera/model/op_list.h"

inline tessera::OpEntry attention_entry(tessera::OpPhase phase) {
  tessera::OpEntry e;
  e.cls = tessera::OpClass::Attention;
  e.op = tessera::Op::Attention;
  e.phase = phase;
  e.m = 2, e.n = 2048, e.k = 256, e.batch = 4;  // B, T, Cl, NH
  e.flops = 4.0 * 2 * 2048.0 * 2048.0 * 256;
  return e;
}
