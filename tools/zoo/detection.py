"""torchvision's detectors as a deployment splits them, for tools/zoo/zoo.py: the
network (backbone, feature pyramid, heads: traced, int8, deployed) and the
post-processing (anchors of the fixed input size, box decoding, score threshold,
top-k, NMS: torchvision's own postprocess_detections) in a module that `qfx ptq` keeps
whole (tracer.wrap module_type:...) and leaves to the host.

Random weights: the classification heads' prior bias (-4.6, a 1 % score) is reset to
0 so that boxes pass the score threshold, and batch-norm statistics come from random
inputs.
"""
from typing import Dict, List, Tuple

import torch
import torchvision
from torch import nn
from torchvision.models.detection import FCOS, RetinaNet
from torchvision.models.detection.ssd import SSD
from torchvision.models.detection.image_list import ImageList

# Input sizes a 2-core machine runs in seconds (SSDlite's anchors are laid out for 320).
DETECTION = {"retinanet_resnet50_fpn": 128, "fcos_resnet50_fpn": 128, "ssdlite320_mobilenet_v3_large": 320}
NUM_CLASSES = 5
DETECTIONS_PER_IMAGE = 20


class Network(nn.Module):
    """Backbone, feature pyramid and head: [N, 3, S, S] -> the head's tensors in `keys` order."""

    def __init__(self, m, keys: List[str]):
        super().__init__()
        self.backbone = m.backbone
        self.head = m.head
        self.keys = keys

    def forward(self, x) -> List[torch.Tensor]:
        out = self.head(list(self.backbone(x).values()))
        return [out[k] for k in self.keys]


class _Post(nn.Module):
    """What torchvision's postprocess_detections reads, for one fixed input size."""

    def __init__(self, m, network, size):
        super().__init__()
        self.box_coder = m.box_coder
        self.score_thresh = m.score_thresh
        self.nms_thresh = m.nms_thresh
        self.detections_per_img = DETECTIONS_PER_IMAGE
        self.topk_candidates = m.topk_candidates
        self.size = size
        with torch.no_grad():
            x = torch.zeros(1, 3, size, size)
            feats = list(network.backbone(x).values())
            anchors = m.anchor_generator(ImageList(x, [(size, size)]), feats)[0]
        self.register_buffer("anchors", anchors)
        per_level = anchors.size(0) // sum(f.size(2) * f.size(3) for f in feats)
        self.counts = [f.size(2) * f.size(3) * per_level for f in feats]  # anchors per level

    def levels(self, t: torch.Tensor) -> List[torch.Tensor]:
        return list(t.split(self.counts, 1))

    def level_anchors(self, n: int) -> List[List[torch.Tensor]]:
        return [list(self.anchors.split(self.counts, 0)) for _ in range(n)]

    def shapes(self, n: int) -> List[Tuple[int, int]]:
        return [(self.size, self.size) for _ in range(n)]


class RetinaNetPostProcess(_Post):
    postprocess_detections = RetinaNet.postprocess_detections

    def forward(self, cls_logits, bbox_regression) -> List[Dict[str, torch.Tensor]]:
        n = cls_logits.size(0)
        heads = {"cls_logits": self.levels(cls_logits), "bbox_regression": self.levels(bbox_regression)}
        return self.postprocess_detections(heads, self.level_anchors(n), self.shapes(n))


class FCOSPostProcess(_Post):
    postprocess_detections = FCOS.postprocess_detections

    def forward(self, cls_logits, bbox_regression, bbox_ctrness) -> List[Dict[str, torch.Tensor]]:
        n = cls_logits.size(0)
        heads = {"cls_logits": self.levels(cls_logits), "bbox_regression": self.levels(bbox_regression),
                 "bbox_ctrness": self.levels(bbox_ctrness)}
        return self.postprocess_detections(heads, self.level_anchors(n), self.shapes(n))


class SSDPostProcess(_Post):
    postprocess_detections = SSD.postprocess_detections

    def forward(self, bbox_regression, cls_logits) -> List[Dict[str, torch.Tensor]]:
        n = cls_logits.size(0)
        heads = {"bbox_regression": bbox_regression, "cls_logits": cls_logits}
        return self.postprocess_detections(heads, [self.anchors for _ in range(n)], self.shapes(n))


class Detector2(nn.Module):
    def __init__(self, network, post):
        super().__init__()
        self.net = network
        self.post = post

    def forward(self, x) -> List[Dict[str, torch.Tensor]]:
        a, b = self.net(x)
        return self.post(a, b)


class Detector3(Detector2):
    def forward(self, x) -> List[Dict[str, torch.Tensor]]:
        a, b, c = self.net(x)
        return self.post(a, b, c)


def post_module_type(arch):
    """The wrap entry that keeps `arch`'s post-processing whole."""
    return "module_type:" + {"retinanet_resnet50_fpn": "RetinaNetPostProcess", "fcos_resnet50_fpn": "FCOSPostProcess",
                             "ssdlite320_mobilenet_v3_large": "SSDPostProcess"}[arch]


def build_detector(arch):
    """(the deployable detector, its network alone) for `arch`, eval mode."""
    size = DETECTION[arch]
    torch.manual_seed(0)
    m = getattr(torchvision.models.detection, arch)(weights=None, weights_backbone=None, num_classes=NUM_CLASSES)
    for name, p in m.head.named_parameters():  # the classification prior: scores of 1 %
        if "cls_logits" in name and name.endswith("bias"):
            nn.init.zeros_(p)
    if arch.startswith("retinanet"):
        net, post, det = Network(m, ["cls_logits", "bbox_regression"]), RetinaNetPostProcess, Detector2
    elif arch.startswith("fcos"):
        net, post, det = Network(m, ["cls_logits", "bbox_regression", "bbox_ctrness"]), FCOSPostProcess, Detector3
    else:
        net, post, det = Network(m, ["bbox_regression", "cls_logits"]), SSDPostProcess, Detector2
    net.train()
    with torch.no_grad():  # batch-norm statistics of random inputs
        for _ in range(3):
            net(torch.randn(4, 3, size, size))
    net.eval()
    return det(net, post(m, net, size)).eval(), net
