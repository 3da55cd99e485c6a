"""PEFT on "tpu" (issue #17): LoRA fine-tuning of a tiny causal LM equals the same fine-tuning on
the CPU, step by step, and the adapter saved from tpu reloads (on tpu and on the CPU) to the same
model. Everything is built offline from config classes."""
import copy

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.not_in_debug_tier(
    "whole Hugging Face pipelines; the ops they run are the subjects of the debug tier's "
    "op files and OpInfo sweeps")

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")


def tiny_llama():
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def lora(model):
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"])
    torch.manual_seed(1)  # LoRA's A matrices are drawn on the CPU, the same on both sides
    return peft.get_peft_model(model, config)


def batches(n):
    g = torch.Generator().manual_seed(2)
    return [torch.randint(3, 96, (2, 12), generator=g) for _ in range(n)]


def fine_tune(model, device, data):
    model.to(device).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-2)
    losses = []
    for ids in data:
        ids = ids.to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().to("cpu"))
    return torch.stack(losses)


def test_lora_fine_tuning_equals_the_cpu_and_the_adapter_reloads(tmp_path):
    base = tiny_llama()
    on_cpu, on_tpu = lora(copy.deepcopy(base)), lora(copy.deepcopy(base))
    trainable = sum(p.numel() for p in on_tpu.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in on_tpu.parameters() if not p.requires_grad)
    assert 0 < trainable < frozen
    torchtpu.metrics.reset()
    data = batches(1) * 4  # one batch, four times: the loss must fall
    cpu_losses = fine_tune(on_cpu, "cpu", data)
    tpu_losses = fine_tune(on_tpu, "tpu", data)
    torch.testing.assert_close(tpu_losses, cpu_losses, atol=1e-4, rtol=1e-4)
    assert tpu_losses[-1] < tpu_losses[0]  # it learns
    assert torchtpu.metrics.fallbacks() == {}

    # only the adapters moved, and as on the CPU; the base weights did not
    cpu_state, tpu_state = on_cpu.state_dict(), on_tpu.state_dict()
    for name, value in tpu_state.items():
        torch.testing.assert_close(value.cpu(), cpu_state[name], atol=1e-4, rtol=1e-3,
                                   msg=lambda m: f"{name}: {m}")
    base_weight = base.model.layers[0].self_attn.q_proj.weight
    tuned_base = on_tpu.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight
    assert torch.equal(tuned_base.cpu(), base_weight)

    # save from tpu, reload onto a fresh base model on tpu and on the CPU: the same outputs
    on_tpu.save_pretrained(tmp_path)
    ids = batches(1)[0]
    on_tpu.eval()
    with torch.no_grad():
        want = on_tpu(input_ids=ids.to("tpu")).logits.cpu()
    for device in ("tpu", "cpu"):
        reloaded = peft.PeftModel.from_pretrained(copy.deepcopy(base).to(device), tmp_path).eval()
        with torch.no_grad():
            got = reloaded(input_ids=ids.to(device)).logits.cpu()
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=lambda m: f"{device}: {m}")
    # merged into the base weights: still the same model
    merged = peft.PeftModel.from_pretrained(copy.deepcopy(base).to("tpu"), tmp_path).merge_and_unload()
    with torch.no_grad():
        got = merged(input_ids=ids.to("tpu")).logits.cpu()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert not any("lora" in n for n, _ in merged.named_parameters())
