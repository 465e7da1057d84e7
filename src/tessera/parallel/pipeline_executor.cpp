#include "tessera/parallel/pipeline_executor.h"

#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "tessera/core/error.h"

namespace tessera {

namespace {

bool is_recv(ActionType t) {
  return t == ActionType::RecvActivation || t == ActionType::RecvGrad;
}

}  // namespace

// One in-flight (micro-batch, chunk): its activations, its tokens, and the
// transfers that read or write them.
struct PipelineExecutor::Slot {
  Activations acts;
  std::vector<int32_t> inputs, targets;  // (B, T) each, on stages that embed / compute the loss
  int64_t mb = -1, chunk = -1;           // the owner; -1 when free
  comm::Work act_recv, grad_recv;        // irecvs into acts.encoded / acts.dresid
  bool act_posted = false, grad_posted = false;
  // Isends still reading this slot: its output (acts.output()) and its
  // input gradient (acts.dresid). Each is waited for only before its buffer
  // is written again: the output by the next owner's forward (waited for
  // when the slot is handed over), dresid by a gradient's receive, a V
  // hand-off's copy or a backward.
  std::vector<comm::Work> act_sends, grad_sends;
  // Split backward (zb-h1) only: per chunk layer, what its BackwardInput
  // keeps for its BackwardWeight (model/block.h), in stash_mem.
  Buffer stash_mem;                     // (L * layer_grad_stash_bytes) bytes
  std::vector<LayerGradStash> stash;    // (L) views into stash_mem

  static void finish(std::vector<comm::Work>& sends) {
    for (auto& w : sends) w.wait();
    sends.clear();
  }
  void finish_act_sends() { finish(act_sends); }
  void finish_grad_sends() { finish(grad_sends); }
  void finish_sends() {
    finish_act_sends();
    finish_grad_sends();
  }
};

PipelineExecutor::PipelineExecutor(GPT& model, comm::Grid& grid, const PipelineOptions& options)
    : model_(model), grid_(grid), opt_(options) {
  p_ = grid.pp().size();
  rank_ = grid.pp().rank();
  placement_ = chunk_placement(opt_.kind);
  const int64_t v = opt_.virtual_stages;
  head_rank_ = chunk_rank(p_, p_ * v - 1, placement_);
  actions_ = build_schedule(opt_.kind, p_, v, opt_.micro_batches, rank_);
  for (int64_t c = 0; c < v; ++c) {
    chunks_.push_back(model_.stage_chunk(c, v));
    // Under the V the previous global chunk may be this rank's too (the
    // last rank's chunk 1 follows its chunk 0): its input is handed over in
    // memory, and its input gradient goes back the same way (schedule.h's
    // Emitter puts no transfer there).
    const int64_t g = global_chunk(p_, rank_, c, placement_);
    const bool here = placement_ == ChunkPlacement::V && g > 0 &&
                      chunk_rank(p_, g - 1, placement_) == rank_;
    prev_here_.push_back(here ? chunk_local(p_, g - 1, placement_) : -1);
  }
  const ActShape shape =
      model_.stage_act_shape(opt_.micro_batch, opt_.seq_length, opt_.virtual_stages);
  const int64_t peak = peak_in_flight(actions_);
  const bool tokens = model_.layout().has_embedding() || model_.layout().has_head();
  split_ = std::any_of(actions_.begin(), actions_.end(),
                       [](const Action& a) { return a.type == ActionType::BackwardInput; });
  const int64_t stash_bytes = split_ ? layer_grad_stash_bytes(shape) : 0;  // per layer
  for (int64_t i = 0; i < peak; ++i) {
    auto s = std::make_unique<Slot>();
    activations_init(s->acts, shape);
    s->acts.profile = opt_.profile;
    if (split_) {
      s->stash_mem.allocate((shape.L * stash_bytes + 3) / 4);  // fp32 words
      for (int64_t l = 0; l < shape.L; ++l)
        s->stash.push_back(layer_grad_stash_place(
            shape, static_cast<char*>(s->stash_mem.data()) + l * stash_bytes));
    }
    s->acts.moe_sums = opt_.moe_sums;
    if (tokens) {
      s->inputs.resize(size_t(shape.N()));
      s->targets.resize(size_t(shape.N()));
    }
    slots_.push_back(std::move(s));
  }
}

PipelineExecutor::~PipelineExecutor() = default;

int64_t PipelineExecutor::activation_bytes() const {
  int64_t n = 0;
  for (const auto& s : slots_) n += s->acts.bytes() + int64_t(s->stash_mem.nbytes());
  return n;
}

int64_t PipelineExecutor::tag(const Action& a) const {
  const bool grad = a.type == ActionType::SendGrad || a.type == ActionType::RecvGrad;
  const int64_t boundary = message_boundary(a, p_, rank_, placement_);
  return (a.micro_batch * p_ * opt_.virtual_stages + boundary) * 2 + (grad ? 1 : 0);
}

// The bookkeeping of one step: which slot holds which (micro-batch, chunk),
// the receives still to post, and the loss so far.
//
// Slots are handed out in schedule order: to each RecvActivation (its irecv
// is posted the moment it has a slot) and to each Forward that receives
// nothing (the embedding chunk's, and under zbv's V the last rank's chunk 1,
// whose input its chunk 0 hands over in memory). Handing them out in order
// keeps the count at the schedule's peak: an early receive never takes the
// slot an earlier Forward needs.
struct PipelineExecutor::StepState {
  PipelineExecutor& ex;
  const std::vector<Action>& actions;  // the training step's, or a forward-only pass's
  size_t wire;  // floats per message: (Ns, C)
  std::vector<size_t> demands, grad_recvs;
  std::deque<Slot*> free_slots;
  std::map<std::pair<int64_t, int64_t>, Slot*> live;  // (mb, chunk) -> slot
  size_t next_demand = 0, next_grad = 0;
  std::vector<int64_t> backwards, weights;  // per chunk, this step: Backward(Input)s, BackwardWeights
  double loss_sum = 0.0;

  StepState(PipelineExecutor& e, const std::vector<Action>& list)
      : ex(e),
        actions(list),
        backwards(size_t(e.opt_.virtual_stages), 0),
        weights(size_t(e.opt_.virtual_stages), 0) {
    const ActShape& shape = ex.slots_.front()->acts.s;
    wire = size_t(shape.Ns() * shape.C);
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.type == ActionType::RecvActivation ||
          (a.type == ActionType::Forward &&
           (ex.chunks_[size_t(a.chunk)].embeds || ex.prev_here_[size_t(a.chunk)] >= 0)))
        demands.push_back(i);
      if (a.type == ActionType::RecvGrad) grad_recvs.push_back(i);
    }
    for (auto& s : ex.slots_) free_slots.push_back(s.get());
  }

  void release(Slot* s) {
    live.erase({s->mb, s->chunk});
    s->mb = s->chunk = -1;
    free_slots.push_back(s);
  }

  // Post every receive whose buffer exists, in schedule order.
  void pump() {
    comm::Communicator& pp = ex.grid_.pp();
    while (next_demand < demands.size() && !free_slots.empty()) {
      const Action& a = actions[demands[next_demand++]];
      Slot* s = free_slots.front();
      free_slots.pop_front();
      // The last owner's output may still be leaving; its input gradient
      // (dresid) can keep leaving until something writes dresid. On a
      // last stage with one slot (1F1B) waiting for that here held every
      // next receive, and so the next forward, until the previous stage had
      // taken the gradient: 0.5 ms a micro-batch on an idle 2-core host, up
      // to 16 ms on a loaded one (docs/zero_bubble.md).
      s->finish_act_sends();
      s->mb = a.micro_batch;
      s->chunk = a.chunk;
      live[{a.micro_batch, a.chunk}] = s;
      if (a.type == ActionType::RecvActivation) {
        s->act_recv = pp.recv_async(s->acts.encoded, wire, Precision::Fp32, int(a.peer_rank),
                                    int(ex.tag(a)));
        s->act_posted = true;
      }
    }
    // dresid is untouched by the forward, so a chunk's gradient can land
    // any time after its slot is taken.
    while (next_grad < grad_recvs.size()) {
      const Action& a = actions[grad_recvs[next_grad]];
      auto it = live.find({a.micro_batch, a.chunk});
      if (it == live.end()) break;
      it->second->finish_grad_sends();  // the receive writes dresid
      it->second->grad_recv = pp.recv_async(it->second->acts.dresid, wire, Precision::Fp32,
                                            int(a.peer_rank), int(ex.tag(a)));
      it->second->grad_posted = true;
      ++next_grad;
    }
  }

  Slot* slot_of(const Action& a) {
    auto it = live.find({a.micro_batch, a.chunk});
    TESSERA_CHECK(it != live.end(), "pipeline executor: no activations for {} on pp rank {}",
                  action_str(a), ex.rank_);
    return it->second;
  }
  // The slot of the same micro-batch's local chunk `chunk` (a same-rank hand-off's other end).
  Slot* slot_of(int64_t mb, int64_t chunk) {
    return slot_of(Action{ActionType::Forward, mb, chunk, -1});
  }
};

// The V's turn on one rank: chunk c's input (Ns, C) is the output of the same
// micro-batch's previous chunk on this rank, still held in its slot (until
// its backward). A copy stands in for the message; returns that slot.
PipelineExecutor::Slot* PipelineExecutor::take_local_input(StepState& ss, const Action& a,
                                                          Slot* s) {
  Slot* prev = ss.slot_of(a.micro_batch, prev_here_[size_t(a.chunk)]);
  std::copy_n(prev->acts.output(), ss.wire, s->acts.encoded);
  return prev;
}

void PipelineExecutor::run_forward(StepState& ss, const Action& a, const PipelineCallbacks& cb) {
  Slot* s = ss.slot_of(a);
  const StageChunk& c = chunks_[size_t(a.chunk)];
  if (prev_here_[size_t(a.chunk)] >= 0) take_local_input(ss, a, s);
  if (c.embeds || c.head) cb.data(a.micro_batch, s->inputs.data(), s->targets.data());
  s->acts.dropout = cb.dropout ? cb.dropout(a.micro_batch) : DropoutContext{};
  ss.loss_sum += model_.forward_stage(s->acts, c, s->inputs.data(), s->targets.data(), cb.hooks);
}

void PipelineExecutor::run_backward(StepState& ss, const Action& a, const PipelineCallbacks& cb,
                                    float dloss) {
  Slot* s = ss.slot_of(a);
  const StageChunk& c = chunks_[size_t(a.chunk)];
  s->finish_sends();  // the output went out long ago; backward may reuse buffers
  const int64_t nth = ++ss.backwards[size_t(a.chunk)];  // this chunk's n-th backward this step
  // Split (BackwardInput): the layers' gradients are finished by the weight
  // pass, so the callbacks go round that instead.
  const bool split = a.type == ActionType::BackwardInput;
  if (cb.before_backward && !split)
    cb.before_backward(a.micro_batch, a.chunk, nth == opt_.micro_batches);
  s->acts.dropout = cb.dropout ? cb.dropout(a.micro_batch) : DropoutContext{};  // the forward's masks
  // The chunk's first backward of the step, whichever micro-batch the
  // schedule runs first: its weight gradients still hold zeros.
  s->acts.first_backward_of_step = nth == 1;
  if (split)
    model_.backward_stage_input(s->acts, c, s->inputs.data(), s->targets.data(), dloss,
                                s->stash.data(), cb.hooks);
  else
    model_.backward_stage(s->acts, c, s->inputs.data(), s->targets.data(), dloss, cb.hooks);
  // The V's turn: the input gradient (Ns, C) goes to the previous chunk on
  // this rank, whose slot waits for it in dresid (untouched since its forward).
  const int64_t prev = prev_here_[size_t(a.chunk)];
  if (prev >= 0) {
    Slot* to = ss.slot_of(a.micro_batch, prev);
    to->finish_grad_sends();  // its last owner's gradient may still be leaving
    std::copy_n(s->acts.dresid, ss.wire, to->acts.dresid);
  }
  if (split) return;  // the slot stays taken until the weight pass
  if (cb.after_backward) cb.after_backward(a.micro_batch, a.chunk);
  if (c.embeds || prev >= 0) ss.release(s);  // nothing to send back: done
}

void PipelineExecutor::run_backward_weight(StepState& ss, const Action& a,
                                           const PipelineCallbacks& cb) {
  Slot* s = ss.slot_of(a);
  // W's run in micro-batch order within a chunk, so the n-th is the n-th
  // writer of the chunk's weight gradients, as the n-th Backward of 1F1B.
  const int64_t nth = ++ss.weights[size_t(a.chunk)];
  if (cb.before_backward) cb.before_backward(a.micro_batch, a.chunk, nth == opt_.micro_batches);
  model_.backward_stage_weight(s->acts, chunks_[size_t(a.chunk)], s->stash.data(), nth == 1,
                               cb.hooks);
  if (cb.after_backward) cb.after_backward(a.micro_batch, a.chunk);
  ss.release(s);  // its input gradient's send, if any, is waited for by the next owner
}

void PipelineExecutor::run_reduce_grads(StepState& ss, const PipelineCallbacks& cb) {
  for (auto& s : slots_) s->finish_sends();
  // The loss lives on the head's stage (the last; rank 0 under zbv's V);
  // every stage reports it.
  float loss = float(ss.loss_sum / double(opt_.micro_batches));
  if (p_ > 1) grid_.pp().broadcast(&loss, 1, Precision::Fp32, int(head_rank_));
  loss_ = loss;
  // The tied token table: the first stage's lookup and the last stage's
  // head each hold part of its gradient; both copies must take the same step.
  // An untied model's stages share no table (the last holds lm_head). Under
  // zbv's V one rank holds both ends and the sum is already local (the
  // grid's other member, stage pp - 1, then holds neither).
  const ParamLayout& L = model_.layout();
  if (p_ > 1 && grid_.embedding() != nullptr && !model_.config().untie_embeddings &&
      L.has_embedding() != L.has_head()) {
    const ParamEntry& wte = model_.layout().find("wte");
    grid_.embedding()->all_reduce(std::span<float>(model_.grad_views().wte, size_t(wte.numel())));
  }
  if (cb.reduce_grads) cb.reduce_grads();
}

void PipelineExecutor::run_action(StepState& ss, const Action& a, const PipelineCallbacks& cb,
                                  float dloss) {
  comm::Communicator& pp = grid_.pp();
  switch (a.type) {
    case ActionType::RecvActivation: {
      Slot* s = ss.slot_of(a);
      TESSERA_CHECK(s->act_posted, "pipeline executor: {} never posted", action_str(a));
      s->act_recv.wait();
      s->act_posted = false;
      break;
    }
    case ActionType::RecvGrad: {
      Slot* s = ss.slot_of(a);
      TESSERA_CHECK(s->grad_posted, "pipeline executor: {} never posted", action_str(a));
      s->grad_recv.wait();
      s->grad_posted = false;
      break;
    }
    case ActionType::Forward:
      run_forward(ss, a, cb);
      break;
    case ActionType::SendActivation: {
      Slot* s = ss.slot_of(a);
      s->act_sends.push_back(
          pp.send_async(s->acts.output(), ss.wire, Precision::Fp32, int(a.peer_rank), int(tag(a))));
      break;
    }
    case ActionType::Backward:
    case ActionType::BackwardInput:
      run_backward(ss, a, cb, dloss);
      break;
    case ActionType::BackwardWeight:
      run_backward_weight(ss, a, cb);
      break;
    case ActionType::SendGrad: {
      Slot* s = ss.slot_of(a);
      s->grad_sends.push_back(
          pp.send_async(s->acts.dresid, ss.wire, Precision::Fp32, int(a.peer_rank), int(tag(a))));
      // The next owner waits for this send before touching the slot; under
      // a split backward the weight pass still needs it (and releases it).
      if (!split_) ss.release(s);
      break;
    }
    case ActionType::ReduceGrads:
      run_reduce_grads(ss, cb);
      break;
    case ActionType::OptimizerStep:
      if (cb.optimizer_step) cb.optimizer_step();
      break;
  }
}

PipelineStepStats PipelineExecutor::step(const PipelineCallbacks& cb, float dloss) {
  StepState ss(*this, actions_);
  PipelineStepStats st;
  st.spans.reserve(actions_.size());
  double pipeline_end = 0.0;
  const double t_begin = trace_now_us();
  for (const Action& a : actions_) {
    ss.pump();
    const double t0 = trace_now_us();
    run_action(ss, a, cb, dloss);
    const double t1 = trace_now_us();
    st.spans.push_back({a, t0, t1});
    if (is_recv(a.type)) st.wait_seconds += (t1 - t0) / 1e6;
    if (a.type != ActionType::ReduceGrads && a.type != ActionType::OptimizerStep)
      pipeline_end = t1;
  }
  st.loss = loss_;
  st.pipeline_seconds = (pipeline_end - t_begin) / 1e6;
  st.idle_fraction = st.pipeline_seconds > 0 ? st.wait_seconds / st.pipeline_seconds : 0.0;
  return st;
}

std::vector<float> PipelineExecutor::forward_only(const PipelineCallbacks& cb, int64_t m) {
  const std::vector<Action> actions =
      build_forward_schedule(p_, opt_.virtual_stages, m, rank_, placement_);
  StepState ss(*this, actions);
  std::vector<float> losses(size_t(m), 0.0f);  // (m,) filled on the last stage
  comm::Communicator& pp = grid_.pp();
  for (const Action& a : actions) {
    ss.pump();
    Slot* s = ss.slot_of(a);
    switch (a.type) {
      case ActionType::RecvActivation:
        TESSERA_CHECK(s->act_posted, "pipeline executor: {} never posted", action_str(a));
        s->act_recv.wait();
        s->act_posted = false;
        break;
      case ActionType::Forward: {
        const StageChunk& c = chunks_[size_t(a.chunk)];
        // The V's turn: the previous chunk's slot is done once its output is copied.
        if (prev_here_[size_t(a.chunk)] >= 0) ss.release(take_local_input(ss, a, s));
        if (c.embeds || c.head) cb.data(a.micro_batch, s->inputs.data(), s->targets.data());
        s->acts.dropout = DropoutContext{};  // evaluation: no dropout
        const float loss =
            model_.forward_stage(s->acts, c, s->inputs.data(), s->targets.data(), cb.hooks);
        if (c.head) {
          losses[size_t(a.micro_batch)] = loss;
          ss.release(s);  // the last global chunk sends nothing on
        }
        break;
      }
      case ActionType::SendActivation:
        s->act_sends.push_back(
            pp.send_async(s->acts.output(), ss.wire, Precision::Fp32, int(a.peer_rank), int(tag(a))));
        ss.release(s);  // the next owner waits for this send before touching the slot
        break;
      default:
        fail("pipeline executor: {} in a forward-only pass", action_str(a));
    }
  }
  for (auto& s : slots_) s->finish_sends();
  // The losses live on the head's stage; every stage returns them.
  if (p_ > 1) pp.broadcast(losses.data(), size_t(m), Precision::Fp32, int(head_rank_));
  return losses;
}

}  // namespace tessera
