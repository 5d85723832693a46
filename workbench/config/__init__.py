"""Run configuration: schema, loading, validation."""
from .loading import (
    ConfigError,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    load_config,
    mapping_from_text,
    merge_config,
    parse_value,
    read_config_file,
    read_mapping_file,
    replace,
    save_config,
)
from .schema import (
    CheckpointSection,
    CliFlag,
    DataSection,
    LOSS_HEADS,
    LoraSection,
    LossHead,
    MemorySection,
    ModelSection,
    OutputSection,
    PrecisionSection,
    QUANTIZED_BASES,
    QuantizationSection,
    RunConfig,
    ScheduleSection,
    Section,
    cli_flag,
    leaf_fields,
    single_process,
    world_size_for,
)

__all__ = [
    "ConfigError", "apply_overrides", "config_from_dict", "config_to_dict", "load_config", "mapping_from_text", "merge_config", "parse_value",
    "read_config_file", "read_mapping_file", "replace", "save_config", "CheckpointSection", "DataSection", "LoraSection", "LOSS_HEADS", "LossHead", "MemorySection",
    "ModelSection", "OutputSection", "PrecisionSection", "QUANTIZED_BASES", "QuantizationSection", "RunConfig", "ScheduleSection", "Section", "leaf_fields",
    "CliFlag", "cli_flag", "single_process", "world_size_for",
]
