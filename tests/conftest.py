import pytest
import torch

from aoq.testing.cases import inference_configs

CONFIGS = inference_configs()
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def config_ids(configs):
    return [c.id for c in configs]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
