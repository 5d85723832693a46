"""Workbench: mixed-precision LoRA fine-tuning with the precision machinery in plain sight."""
__version__ = "0.1.0"
