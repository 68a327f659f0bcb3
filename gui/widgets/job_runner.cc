#include "gui/widgets/job_runner.h"

#include <algorithm>

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QThread>
#include <exception>
#include <memory>

#include "core/error.h"

namespace strata::gui {

namespace {
struct Outcome {
  bool ok = false;
  bool cancelled = false;
  QString error;
};
}  // namespace

JobRunner::JobRunner(QObject* parent) : QObject(parent) {}

JobRunner::~JobRunner() {
  if (thread_ != nullptr) {
    cancel_ = true;
    thread_->wait();
  }
}

bool JobRunner::start(const QString& label, Work work, Done on_done) {
  if (thread_ != nullptr) return false;
  cancel_ = false;
  last_permille_ = -1;
  label_ = label;
  auto outcome = std::make_shared<Outcome>();
  ProgressFn report = [this](std::int64_t done, std::int64_t total, std::string_view) {
    const double fraction = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
    // Only whole per-mille steps cross threads: a job may call this millions of times.
    const int permille = static_cast<int>(fraction * 1000.0);
    if (last_permille_.exchange(permille) != permille) {
      QMetaObject::invokeMethod(
          this, [this, fraction] { emit progress(fraction); }, Qt::QueuedConnection);
    }
    return !cancel_.load();
  };
  thread_ = QThread::create([work = std::move(work), report, outcome] {
    try {
      work(report);
      outcome->ok = true;
    } catch (const Cancelled&) {
      outcome->cancelled = true;
    } catch (const std::exception& e) {
      outcome->error = QString::fromStdString(e.what());
    } catch (...) {
      outcome->error = QStringLiteral("unknown error");
    }
  });
  connect(thread_, &QThread::finished, this, [this, outcome, on_done = std::move(on_done)] {
    thread_->deleteLater();
    thread_ = nullptr;
    if (outcome->ok && on_done) {
      try {
        on_done();
      } catch (const std::exception& e) {
        outcome->ok = false;
        outcome->error = QString::fromStdString(e.what());
      }
    }
    emit finished(outcome->ok, outcome->cancelled, outcome->error);
  });
  emit started(label);
  thread_->start();
  return true;
}

void JobRunner::cancel() { cancel_ = true; }

bool JobRunner::wait_idle(int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (thread_ != nullptr && !deadline.hasExpired()) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    if (thread_ != nullptr) thread_->wait(5);
  }
  QCoreApplication::processEvents();
  return thread_ == nullptr;
}

}  // namespace strata::gui
