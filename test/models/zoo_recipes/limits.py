"""Model types of the transformers zoo that no recipe can make run honestly, and why (shown next
to their error in docs/models.md). Facts checked on this machine (transformers and torch as
pinned by scripts/setup.sh)."""
from __future__ import annotations

_TIMM = ("needs timm, whose PyPI wheel imports torchvision at `import timm` (timm/layers/"
         "create_norm.py), and torchvision's PyPI wheels do not load next to a CPU build of torch 2.13")
_SESSION = "its forward takes a stateful video inference session object, not tensors"

LIMITS: dict[str, str] = {
    **{t: _TIMM for t in ("gemma3n", "gemma3n_vision", "dab-detr", "deformable_detr", "detr",
                          "conditional_detr", "table-transformer", "omdet-turbo", "edgetam",
                          "edgetam_vision_model", "pe_audio_video", "pe_audio_video_encoder",
                          "pe_video", "pe_video_encoder", "timm_backbone", "timm_wrapper",
                          "fast_vlm", "perception_lm")},
    "layoutlmv2": "needs detectron2 (not on PyPI)",
    "dinat": "needs natten (CUDA/C++ neighbourhood-attention kernels, no wheel for this torch)",
    "higgs_audio_v2_tokenizer": "needs torchaudio, whose wheels are built for CUDA torch releases",
    **{t: _SESSION for t in ("edgetam_video", "sam2_video", "sam3_video", "sam3_tracker_video")},
    "bark": ("BarkModel has no forward (a pipeline of four sub-models, each with its own "
             "sub-configuration)"),
    "glm_image_vqmodel": "its only class (GlmImageVQVAE) has no forward",
    "wavtokenizer": ("its quantizer's codebook is zeros until a checkpoint loads it: the decoder's "
                     "group norms then normalize constant data and the output is rounding noise"),
    "wavtokenizer_encoder": "returns integer codes only: nothing to differentiate or compare in float",
    "vilt": ("every forward samples image patches with torch.multinomial; no config field or "
             "input turns it off"),
    "reformer": "its reversible layers refuse backward in eval mode, which the zoo runs models in",
    "gemma4_assistant": ("the default configuration fails its own validation in "
                         "AutoConfig.for_model (hidden_size_per_layer_input must be 0, got 256)"),
    "doge": ("a transformers bug: modeling_doge imports BlockMask only when flex attention is "
             "available, and the forward names it anyway (NameError)"),
    "voxtral_realtime_text": ("a transformers bug: the auto mapping names VoxtralRealtimeTextModel, "
                              "which the package does not export"),
    "musicgen": ("the causal-LM auto class is built from the composite configuration but needs "
                 "its decoder part"),
    "musicgen_melody": ("the causal-LM auto class is built from the composite configuration but "
                        "needs its decoder part"),
}
