// The Topology tab: the cluster graph with each link colored by its
// utilization during the simulated step (green idle, red saturated). "Fabric"
// shows the switches and one box per node; picking a node (the list, or a
// double-click on its box) shows its GPUs, NVSwitches, PCIe switches and NICs.
// Drawn with QGraphicsView: a few thousand items, each with its own tooltip.
#pragma once

#include <QWidget>
#include <memory>
#include <vector>

#include "gui/model/topology_picture.h"

class QComboBox;
class QGraphicsScene;
class QGraphicsView;
class QLabel;

namespace strata::gui {

class TopologyView : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyView(QWidget* parent = nullptr);

  // Shows the links of a result; an empty list shows message instead.
  void set_links(const std::vector<LinkUse>& links, const QString& title,
                 const QString& message = QString());
  // -1 for the fabric, else a node number.
  void show_node(int node);
  int shown_node() const { return shown_node_; }
  const TopologyGraph& graph() const { return graph_; }
  QGraphicsScene* scene() const { return scene_; }
  // Item and link counts of the picture on screen (for tests).
  int item_count() const { return item_count_; }
  int link_count() const { return link_count_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  void draw(const TopologyPicture& picture);
  void fit_view();

  TopologyGraph graph_;
  int shown_node_ = -1;
  int item_count_ = 0, link_count_ = 0;
  QComboBox* which_;
  QLabel* title_;
  QGraphicsScene* scene_;
  QGraphicsView* view_;
};

}  // namespace strata::gui
