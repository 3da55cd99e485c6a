# Copyright 2026 Google LLC
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""A test runner for the manual data parallel example."""

from torch.google import distributed as gdist
import torch.multiprocessing as mp
from torch_tpu._internal.distributed.launchers import singlehost_wrapper
from examples.distributed.data_parallel.manual import dp_worker

from torch_tpu.shims.g3_multiprocessing import g3_multiprocessing


def main(_):
  singlehost_wrapper.prepare_tpu_environment()
  gdist.torchrun(dp_worker.worker_fn, nproc_per_node=8)()


if __name__ == "__main__":
  mp.set_start_method("spawn")
  g3_multiprocessing.handle_main(main)
