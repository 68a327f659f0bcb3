#include "gui/widgets/topology_view.h"

#include <fmt/format.h>

#include <QComboBox>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsView>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "gui/model/span_text.h"
#include "gui/widgets/colors.h"

namespace strata::gui {
namespace {

constexpr double kBoxW = 70.0, kBoxH = 30.0;
constexpr int kNodeRole = 0;  // QGraphicsItem::data key holding a node box's node

QString link_tooltip(const TopologyPicture& pic, const PictureLink& l) {
  std::string text = fmt::format("{} ↔ {}", pic.items[l.from].label, pic.items[l.to].label);
  if (!l.kind.empty()) text += fmt::format(" · {}", l.kind);
  if (l.merged > 1) text += fmt::format(" · {} links", l.merged);
  text += fmt::format("\n{:.0f} GB/s per direction", l.bandwidth_bytes_per_s / 1e9);
  text += fmt::format("\n{} moved in the step", format_bytes(l.bytes));
  text += fmt::format("\n{:.1f}% busy (the busier direction{})", l.utilization * 100.0,
                      l.merged > 1 ? ", hottest link" : "");
  return QString::fromStdString(text);
}

}  // namespace

TopologyView::TopologyView(QWidget* parent) : QWidget(parent) {
  which_ = new QComboBox(this);
  title_ = new QLabel(this);
  scene_ = new QGraphicsScene(this);
  view_ = new QGraphicsView(scene_, this);
  view_->setRenderHint(QPainter::Antialiasing, true);
  view_->setDragMode(QGraphicsView::ScrollHandDrag);
  view_->setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  view_->viewport()->installEventFilter(this);
  scene_->installEventFilter(this);

  auto* legend = new QLabel(this);
  QString ramp;
  for (int i = 0; i <= 4; ++i) {
    ramp += QStringLiteral("<span style=\"color:%1\">■</span>&nbsp;%2%&nbsp; ")
                .arg(utilization_color(i / 4.0).name())
                .arg(i * 25);
  }
  legend->setText(tr("link utilization: ") + ramp);
  legend->setTextFormat(Qt::RichText);

  auto* tools = new QHBoxLayout;
  tools->addWidget(which_);
  tools->addWidget(title_, 1);
  tools->addWidget(legend);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(tools);
  layout->addWidget(view_, 1);

  connect(which_, &QComboBox::activated, this,
          [this](int index) { show_node(which_->itemData(index).toInt()); });
  set_links({}, QString());
}

void TopologyView::set_links(const std::vector<LinkUse>& links, const QString& title,
                             const QString& message) {
  graph_ = TopologyGraph::from_links(links);
  title_->setText(title);
  which_->clear();
  which_->addItem(tr("Fabric"), -1);
  for (int node : graph_.nodes()) which_->addItem(tr("node %1").arg(node), node);
  if (links.empty()) {
    scene_->clear();
    item_count_ = link_count_ = 0;
    auto* text = scene_->addSimpleText(
        message.isEmpty() ? tr("No link utilization loaded. Open a result.json of strata "
                               "simulate.")
                          : message);
    text->setBrush(Qt::darkGray);
    scene_->setSceneRect(text->boundingRect());
    return;
  }
  show_node(-1);
}

void TopologyView::show_node(int node) {
  shown_node_ = node;
  const int index = which_->findData(node);
  if (index >= 0) which_->setCurrentIndex(index);
  draw(node < 0 ? fabric_picture(graph_) : node_picture(graph_, node));
}

void TopologyView::draw(const TopologyPicture& pic) {
  scene_->clear();
  item_count_ = static_cast<int>(pic.items.size());
  link_count_ = static_cast<int>(pic.links.size());
  // Links first so boxes sit on top of their ends.
  for (const PictureLink& l : pic.links) {
    const PictureItem& a = pic.items[l.from];
    const PictureItem& b = pic.items[l.to];
    // Wider lines for faster links: 2 px up to 100 GB/s, 3 at 1 TB/s, in screen
    // pixels (a cosmetic pen), so a fitted 1,000-node fabric keeps them visible
    // and under the pointer for their tooltips.
    const double width =
        std::clamp(1.0 + std::log10(std::max(l.bandwidth_bytes_per_s, 1e9) / 1e9), 2.0, 5.0);
    QPen pen(utilization_color(l.utilization, l.bytes > 0.0), width);
    pen.setCosmetic(true);
    auto* line = scene_->addLine(a.x, a.y, b.x, b.y, pen);
    line->setToolTip(link_tooltip(pic, l));
    line->setZValue(l.utilization);  // hot links on top of idle ones
  }
  for (const PictureItem& item : pic.items) {
    const QRectF r(item.x - kBoxW / 2, item.y - kBoxH / 2, kBoxW, kBoxH);
    auto* box = scene_->addRect(
        r, QPen(Qt::black),
        item.node_box ? QBrush(QColor(0xdd, 0xe6, 0xf2)) : QBrush(QColor(0xf4, 0xf4, 0xf4)));
    box->setZValue(10);
    QString tip = QString::fromStdString(item.label);
    if (item.node_box) {
      box->setData(kNodeRole, item.node);
      tip += tr("\nhottest link to the fabric: %1% busy\ndouble-click for the node's inside")
                 .arg(item.utilization * 100.0, 0, 'f', 1);
      box->setPen(QPen(utilization_color(item.utilization), 3));
    }
    box->setToolTip(tip);
    auto* text = scene_->addSimpleText(QString::fromStdString(item.label));
    QFont f = text->font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
    text->setFont(f);
    const QRectF tb = text->boundingRect();
    text->setPos(item.x - tb.width() / 2, item.y - tb.height() / 2);
    text->setZValue(11);
    text->setToolTip(tip);
    if (item.node_box) text->setData(kNodeRole, item.node);
  }
  scene_->setSceneRect(scene_->itemsBoundingRect().adjusted(-20, -20, 20, 20));
  fit_view();
}

void TopologyView::fit_view() {
  view_->resetTransform();
  view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
  // Never magnify a small graph beyond its natural size.
  if (view_->transform().m11() > 1.0) view_->resetTransform();
}

void TopologyView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fit_view();
}

bool TopologyView::eventFilter(QObject* watched, QEvent* e) {
  if (watched == view_->viewport() && e->type() == QEvent::Wheel) {
    auto* wheel = static_cast<QWheelEvent*>(e);
    const double factor = std::pow(1.25, wheel->angleDelta().y() / 120.0);
    view_->scale(factor, factor);
    return true;
  }
  if (watched == scene_ && e->type() == QEvent::GraphicsSceneMouseDoubleClick) {
    auto* click = static_cast<QGraphicsSceneMouseEvent*>(e);
    for (QGraphicsItem* item : scene_->items(click->scenePos())) {
      const QVariant node = item->data(kNodeRole);
      if (node.isValid()) {
        show_node(node.toInt());
        return true;
      }
    }
  }
  return QWidget::eventFilter(watched, e);
}

}  // namespace strata::gui
