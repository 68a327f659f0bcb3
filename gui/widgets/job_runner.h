// Runs one long job (reading a big trace, a simulation, a sweep) on a worker
// thread while the window stays responsive. The job gets a ProgressFn: each call
// reports the fraction done to the UI thread (progress()) and returns false once
// cancel() was asked, so the job stops and throws Cancelled.
//
// Thread safety: start/cancel/wait are called from the UI thread; the job's
// ProgressFn from the worker. Signals arrive on the UI thread.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <functional>

#include "gui/model/load_progress.h"

class QThread;

namespace strata::gui {

class JobRunner : public QObject {
  Q_OBJECT

 public:
  // Runs on the worker thread; throws InputError, Cancelled or any exception.
  using Work = std::function<void(const ProgressFn& progress)>;
  // Runs on the UI thread after work succeeded.
  using Done = std::function<void()>;

  explicit JobRunner(QObject* parent = nullptr);
  ~JobRunner() override;

  // Starts work unless a job is running (then returns false and does nothing).
  bool start(const QString& label, Work work, Done on_done);
  // Asks the running job to stop at its next progress call.
  void cancel();
  bool busy() const { return thread_ != nullptr; }
  QString label() const { return label_; }
  // Waits, processing events, until no job runs or timeout_ms passes; true when idle.
  bool wait_idle(int timeout_ms);

 signals:
  void started(const QString& label);
  void progress(double fraction);
  // ok: work returned normally; cancelled: it stopped on request; error: the
  // exception's message otherwise.
  void finished(bool ok, bool cancelled, const QString& error);

 private:
  QThread* thread_ = nullptr;
  QString label_;
  std::atomic<bool> cancel_{false};
  std::atomic<int> last_permille_{-1};
};

}  // namespace strata::gui
