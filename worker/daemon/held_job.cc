#include "worker/daemon/held_job.h"

namespace pipecoord::worker {

void HeldJob::Cancel(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cancelled_) cancel_reason_ = why;
  cancelled_ = true;
  if (executor_ != nullptr) executor_->Cancel();
  if (transport_ != nullptr) transport_->Shutdown();  // wakes Connect and every Recv
  recovery_cv_.notify_all();
}

void HeldJob::Halt(int after_step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return;
  halted_ = true;
  if (after_step >= 0) {
    stop_after_ = after_step;
    if (executor_ != nullptr) executor_->StopAfterStep(after_step);
    return;
  }
  if (executor_ != nullptr) executor_->Cancel();
  if (transport_ != nullptr) transport_->Shutdown();
}

bool HeldJob::halted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return halted_;
}

void HeldJob::Recover(v1::ResumeInPlace resume) {
  std::lock_guard<std::mutex> lock(mu_);
  if (resume.recovery().generation() <= generation_) return;  // one already taken (a command sent again)
  recovery_ = std::move(resume);
  recovery_cv_.notify_all();
}

std::optional<v1::ResumeInPlace> HeldJob::WaitRecovery(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  recovery_cv_.wait_until(lock, deadline, [&] { return cancelled_ || recovery_.has_value(); });
  if (cancelled_ || !recovery_.has_value()) return std::nullopt;
  std::optional<v1::ResumeInPlace> out = std::move(recovery_);
  recovery_.reset();
  generation_ = out->recovery().generation();
  stop_after_ = -2;  // a halt's stop step is behind the run that resumes
  halted_ = false;
  return out;
}

bool HeldJob::StopGracefully() {
  std::lock_guard<std::mutex> lock(mu_);
  if (executor_ != nullptr) {
    if (stop_after_ == -2) executor_->StopAfterStep();  // a coordinated stop step stays
    return true;
  }
  if (!cancelled_) {
    cancel_reason_ = "the worker is shutting down";
    quiet_ = true;
  }
  cancelled_ = true;
  if (transport_ != nullptr) transport_->Shutdown();
  return false;
}

void HeldJob::StopAfter(int step) {
  std::lock_guard<std::mutex> lock(mu_);
  stop_after_ = step;
  if (executor_ != nullptr) executor_->StopAfterStep(step);
}

bool HeldJob::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executor_ != nullptr && !cancelled_;
}

bool HeldJob::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

std::string HeldJob::cancel_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancel_reason_;
}

bool HeldJob::quiet() const {
  std::lock_guard<std::mutex> lock(mu_);
  return quiet_;
}

void HeldJob::MarkReleasing() {
  std::lock_guard<std::mutex> lock(mu_);
  releasing_ = true;
}

bool HeldJob::releasing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return releasing_;
}

bool HeldJob::AttachTransport(Transport* transport) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  transport_ = transport;
  return true;
}

bool HeldJob::AttachExecutor(Executor* executor) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  executor_ = executor;
  if (stop_after_ != -2) executor_->StopAfterStep(stop_after_);
  return true;
}

void HeldJob::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  transport_ = nullptr;
  executor_ = nullptr;
}

}  // namespace pipecoord::worker
