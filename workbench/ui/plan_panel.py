"""The plan panel: the memory planner's prediction for the current config on a device set.

It recomputes whenever the config changes. In a kernel the prediction runs in a worker thread
(the first census of a 9B model takes seconds) and the result is drawn back on the kernel's event
loop, debounced, so typing in the config panel never blocks; without a running loop it is synchronous.
"""

from __future__ import annotations

import asyncio
import html

import ipywidgets as W

from ..config import ConfigError, RunConfig, config_from_dict, world_size_for
from ..plan import DEFAULT_DEVICES, DeviceSet, Plan, predict_for_run
from ..plan.options import PlanOptions
from ..plan.planner import OFFLOADS, STRATEGIES
from ..precision import resolve_policy

GiB = 1024**3
DEBOUNCE_S = 0.3


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def sharding_of(cfg: RunConfig) -> dict:
    """strategy / stage / offload / world size from the config's ``sharding`` section."""
    sh = cfg.sharding
    return {"strategy": sh.strategy, "stage": sh.stage, "offload": sh.offload, "world_size": sh.world_size}


def plan_for(
    cfg: RunConfig,
    devices: DeviceSet,
    strategy: str = "none",
    stage: int = 0,
    offload: str = "none",
    world_size: int = 1,
    images_per_row: int = 0,
    image_size: str = "1080x2400",
) -> Plan:
    """The planner's prediction for ``cfg`` on ``devices``, its precision resolved for those devices by the
    shared policy (``auto``: bf16 where they have it, else fp16); ``images_per_row`` screenshots of
    ``image_size`` per example on top of the text (vision-language models)."""
    policy = resolve_policy(cfg.precision, devices.hardware, cfg.lora.enabled, cfg.model.dtype)
    return predict_for_run(
        cfg,
        policy,
        world_size=world_size_for(strategy, world_size),
        strategy=strategy,
        stage=stage,
        offload=offload,
        devices=devices,
        images_per_row=images_per_row,
        image_size=image_size,
    )


def plan_html(plan: Plan) -> str:
    d = plan.to_dict()
    dev = plan.devices
    if plan.invalid:
        badge = f"<span class='wb-plan-verdict' style='background:#c62828;color:white;padding:2px 6px'>invalid</span> {html.escape(plan.invalid)}"
    elif plan.fits:
        badge = "<span class='wb-plan-verdict' style='background:#2e7d32;color:white;padding:2px 6px'>fits</span>"
    else:
        badge = (
            "<span class='wb-plan-verdict' style='background:#c62828;color:white;padding:2px 6px'>does not fit</span>"
        )
    head = (
        f"<div>{badge} &nbsp; <b>{html.escape(plan.model)}</b>, {html.escape(plan.setting.label)} on "
        f"{dev.count} x {html.escape(dev.name)} ({_gib(dev.bytes_per_device)} each, host {_gib(dev.host_ram)})</div>"
        f"<div>per GPU: <b>{_gib(plan.gpu_total)}</b>, headroom <b class='wb-plan-headroom'>{_gib(plan.gpu_headroom)}</b>"
        f" &nbsp;|&nbsp; host: {_gib(plan.host_total)}, headroom {_gib(plan.host_headroom)}</div>"
    )
    scale = max(dev.bytes_per_device, plan.gpu_total) or 1
    rows = []
    for k, v in plan.gpu.items():
        if not v:
            continue
        width = max(1, int(300 * v / scale))
        rows.append(
            f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{_gib(v)}</td>"
            f"<td><div style='background:#5c6bc0;height:10px;width:{width}px'></div></td></tr>"
        )
    limit = int(300 * dev.bytes_per_device / scale)
    rows.append(
        f"<tr><td><i>device size</i></td><td style='text-align:right'>{_gib(dev.bytes_per_device)}</td>"
        f"<td><div style='border-top:2px dashed #c62828;width:{limit}px'></div></td></tr>"
    )
    host_rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{_gib(v)}</td><td></td></tr>"
        for k, v in plan.host.items()
        if v
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in d["notes"])
    images = plan.activations.get("images")
    if images:
        head += (
            f"<div class='wb-plan-images'>screenshots: {images['images_per_row']} x {images['size']} per example -> "
            f"<b>{images['tokens_per_image']:,} image tokens</b> each ({images['patches_per_image']:,} patches); "
            f"decoder sequence {plan.activations['seq_len']:,} tokens</div>"
        )
    census = d.get("census") or {}
    census_line = ", ".join(f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}" for k, v in list(census.items())[:6])
    return (
        f"<div class='wb-plan'>{head}<table style='font-size:90%'><tr><th colspan=3 style='text-align:left'>per GPU"
        f"</th></tr>{''.join(rows)}<tr><th colspan=3 style='text-align:left'>host RAM (all ranks)</th></tr>{host_rows}"
        f"</table>{f'<ul>{notes}</ul>' if notes else ''}<div style='color:#888;font-size:85%'>{html.escape(census_line)}</div></div>"
    )


class PlanPanel(W.VBox):
    """Shows ``plan`` (the latest prediction) for ``config`` on ``devices``.

    Args:
        cfg: the configuration planned (``set_config`` plans another).
        devices: the device set planned for (default: 2x RTX 4090), editable in the panel.
    """

    def __init__(self, cfg: RunConfig | None = None, devices: DeviceSet = DEFAULT_DEVICES):
        self.config: RunConfig | None = cfg
        self.plan: Plan | None = None
        self.error: str | None = None
        self._task: asyncio.Task | None = None
        style = {"description_width": "90px"}
        self.devices_text = W.Text(
            value=f"{devices.count}x{devices.bytes_per_device / GiB:.2f}GiB",
            description="devices",
            style=style,
            tooltip="COUNTxSIZE, e.g. 2x24GiB",
        )
        self.device_name = W.Text(value=devices.name, description="name", style=style)
        self.host_text = W.Text(value=f"{devices.host_ram / GiB:g}GiB", description="host RAM", style=style)
        self.bf16 = W.Checkbox(value=devices.bf16, description="bf16 capable", style=style)
        # Used only while the config has no sharding section of its own
        self.strategy = W.Dropdown(options=list(STRATEGIES), value="none", description="strategy", style=style)
        self.stage = W.Dropdown(options=[0, 1, 2, 3], value=0, description="stage", style=style)
        self.offload = W.Dropdown(options=list(OFFLOADS), value="none", description="offload", style=style)
        self.world_size = W.BoundedIntText(value=devices.count, min=1, max=64, description="processes", style=style)
        self.what_if = W.HBox([self.strategy, self.stage, self.offload, self.world_size])
        # screenshots per example (vision-language models): what the phone's images add
        self.images_per_row = W.BoundedIntText(value=0, min=0, max=64, description="images/row", style=style)
        self.image_size = W.Text(
            value="1080x2400",
            description="image size",
            style=style,
            tooltip="WIDTHxHEIGHT before the image processor's resize",
        )
        for w in (
            self.devices_text,
            self.device_name,
            self.host_text,
            self.bf16,
            self.strategy,
            self.stage,
            self.offload,
            self.world_size,
            self.images_per_row,
            self.image_size,
        ):
            w.observe(lambda _: self.schedule(), names="value")
        self.output = W.HTML("<i>no configuration yet</i>")
        super().__init__(
            [
                W.HTML("<b>Memory plan</b>"),
                W.HBox([self.devices_text, self.device_name]),
                W.HBox([self.host_text, self.bf16]),
                self.what_if,
                W.HBox([self.images_per_row, self.image_size]),
                self.output,
            ]
        )
        self.add_class("wb-plan-panel")
        if cfg is not None:
            self.set_config(cfg)

    def devices(self) -> DeviceSet:
        ds = DeviceSet.parse(self.devices_text.value, self.host_text.value, name=self.device_name.value)
        return DeviceSet(
            count=ds.count,
            bytes_per_device=ds.bytes_per_device,
            host_ram=ds.host_ram,
            name=ds.name,
            bf16=self.bf16.value,
        )

    def setting(self, cfg: RunConfig) -> dict:
        own = sharding_of(cfg)
        self.what_if.layout.display = "none" if own else None
        if own:
            return {
                "strategy": own.get("strategy", "none"),
                "stage": int(own.get("stage") or 0),
                "offload": own.get("offload") or "none",
                "world_size": int(own.get("world_size") or 1),
            }
        return {
            "strategy": self.strategy.value,
            "stage": self.stage.value,
            "offload": self.offload.value,
            "world_size": self.world_size.value,
        }

    def set_config(self, cfg: RunConfig | None) -> None:
        self.config = cfg
        self.schedule()

    def compute(self) -> Plan | None:
        """Predict for the current inputs, in this thread; returns the plan (None with ``error`` set)."""
        if self.config is None:
            self.plan, self.error = None, "the configuration has problems (see the config panel)"
            return None
        try:
            images = config_from_dict(
                {"images_per_row": self.images_per_row.value, "image_size": self.image_size.value}, PlanOptions
            )
            plan = plan_for(
                self.config,
                self.devices(),
                **self.setting(self.config),
                images_per_row=images.images(),
                image_size=images.image_size,
            )
            self.plan, self.error = plan, None
        except ConfigError as err:
            self.plan, self.error = None, "; ".join(f"{p}: {m}" for p, m in err.problems)
        except Exception as err:  # noqa: BLE001 - e.g. a hub model whose config cannot be read offline
            self.plan, self.error = None, f"{type(err).__name__}: {err}"
        return self.plan

    def render(self) -> None:
        if self.error:
            self.output.value = (
                f"<span style='color:#c62828' class='wb-plan-error'>cannot plan: {html.escape(self.error)}</span>"
            )
        elif self.plan is not None:
            self.output.value = plan_html(self.plan)

    def refresh(self) -> Plan | None:
        """Synchronous recompute and redraw."""
        self.compute()
        self.render()
        return self.plan

    def schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.refresh()
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self.output.value = self.output.value if self.plan else "<i>planning...</i>"
        self._task = loop.create_task(self._debounced())

    async def _debounced(self) -> None:
        await asyncio.sleep(DEBOUNCE_S)
        cfg = self.config
        await asyncio.get_running_loop().run_in_executor(None, self.compute)
        if cfg is self.config:  # a newer edit has its own task
            self.render()

    async def updated(self) -> Plan | None:
        """Wait for the pending recompute (notebooks: ``await wb.plan.updated()``)."""
        while self._task is not None and not self._task.done():
            try:
                await asyncio.shield(self._task)
            except asyncio.CancelledError:
                await asyncio.sleep(0)
        return self.plan
