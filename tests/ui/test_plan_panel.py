"""The plan panel's screenshot inputs: images per row and their size change the plan it shows."""

from workbench.plan import DeviceSet
from workbench.ui.config_panel import ConfigPanel
from workbench.ui.plan_panel import PlanPanel


def test_plan_panel_counts_screenshots():
    panel = ConfigPanel()
    panel.set("model.source", "tiny-glm4v")
    plan = PlanPanel(panel.config, DeviceSet.parse("1x24GiB"))
    text_only = plan.plan.gpu_total
    plan.images_per_row.value = 2
    assert "image tokens" in plan.output.value and plan.plan.gpu_total > text_only
    assert plan.plan.activations["images"]["tokens_per_image"] == 3354  # 1080x2400 by default
    plan.image_size.value = "540x1200"
    assert plan.plan.activations["images"]["tokens_per_image"] < 3354
    plan.image_size.value = "big"
    assert plan.plan is None and "image_size" in plan.output.value and "WIDTHxHEIGHT" in plan.output.value
    plan.image_size.value = "1080x2400"
    panel.set("model.source", "tiny-glm4")
    plan.set_config(panel.config)
    assert plan.plan is None and "text-only" in plan.output.value
