#!/usr/bin/env python3
"""PyTorch reference for trainscope's `faster_rcnn` workload (Faster R-CNN, ResNet C4), CPU training
throughput.

Mirrors workloads/faster_rcnn/{faster_rcnn,boxes}.{h,cpp} in plain torch (not
torchvision.models.detection, whose layout differs: FPN, other heads):
  backbone  MSRA ResNet C4 (Detectron's R-C4): conv1 7x7/2 (no bias), frozen BN, ReLU, max pool
            3x3/2 pad 1, layer1..layer3 of bottlenecks (1x1 with the stage's stride-2, 3x3, 1x1 x4;
            projection on each stage's first block), stride 16. conv1 and layer1 frozen
            (Detectron's FREEZE_AT 2: requires_grad off, so no backward through them) except tiny.
  batch norm frozen everywhere (torchvision's FrozenBatchNorm2d: weight, bias, mean, var are
            buffers, eps 1e-5). As in trainscope, no checkpoint: the statistics are the average
            of the per-channel mean and E[x^2] over `calibration_images` training images, one
            no-grad training forward each, before the timed region.
  rpn       3x3 conv C->C with bias, ReLU, 1x1 objectness (2 logits per anchor: channel 2a + k),
            1x1 deltas (channel 4a + j); N(0, 0.01) weights, zero biases. 9 anchors per cell:
            sizes x ratios (h/w) 0.5, 1, 2, ratio-major, centred on (stride/2, stride/2).
  targets   anchors crossing the image border ignored; IoU >= 0.7 positive plus each box's best
            anchors (ties included), < 0.3 negative; `rpn_batch` sampled per image, at most half
            positive. Proposals: softmax foreground score, decode (weights 1, size deltas clamped
            at log(1000/16)), clip, drop sides < min size, top pre_nms -> NMS 0.7 -> top post_nms.
  rois      candidates = proposals + ground truth; `rois_per_image` sampled, 25% foreground
            (IoU >= 0.5), background IoU in [0, 0.5). RoIAlign (aligned=False, sampling ratio 2,
            scale 1/16) at `pooled` x `pooled`: torchvision.ops.roi_align when torchvision is
            importable, else the same bilinear sampling written here in plain torch.
  head      layer4 (3 bottlenecks, first stride 2) on the crops, global average pool, cls_score
            (N(0, 0.01)) and class-specific bbox_pred (N(0, 0.001)), zero biases.
  losses    RPN: CE over the sampled anchors + smooth-L1 (beta 1/9) summed over positives /
            sampled; head: CE over the RoIs + smooth-L1 (beta 1) on the true class's deltas
            (coder weights 10, 10, 5, 5) / RoIs. Their sum is the loss.
  optimizer SGD momentum 0.9, weight decay 1e-4 (biases too), frozen layers excluded; lr =
            base_lr x batch/16 after a linear warm-up (step i: x min(1, (i + 1) / warmup)).
  presets   as faster_rcnn_config():
            tiny  blocks 1,1,1 + 1, widths /8, 72x96, 7 classes, anchors 16/32/64, RPN batch 64,
                  proposals 300 -> 100 (min side 2), 32 RoIs, 7x7, batch 2, nothing frozen (289,521)
            small ResNet-50 C4 (3,4,6 + 3), 224x298, 21 classes, anchors 48/96/192, RPN batch 256,
                  proposals 2000 -> 500 (min side 6), 16 RoIs, 14x14, batch 1         (33,163,615)
            full  ResNet-101 C4 (3,4,23 + 3), 600x800, 21 classes, anchors 128/256/512,
                  proposals 12000 -> 2000 (min side 16), 128 RoIs, 14x14, batch 1     (52,103,519)
  data      synthetic: 1-4 boxes per image (sides a fraction min_object..0.6 of the shorter image
            side, aspect 0.6-1.6, overlapping at most IoU 0.3) filled with a class colour on a
            noisy grey gradient, normalised; `--data-batches` batches built before the timed
            region and cycled (trainscope times its data as a separate phase).
  step      the training forward (targets, proposals and RoI sampling included, as trainscope's
            forward phase), backward, SGD step, zero_grad(set_to_none=True), loss.item().

Usage:
  python3 bench/pytorch/faster_rcnn_train.py --preset small --threads 2 --iters 20 --warmup 3 --json
  python3 bench/pytorch/faster_rcnn_train.py --check-params
"""
import math
import os

import common

PRESETS = {
    "tiny": dict(blocks=(1, 1, 1), head_blocks=1, base_width=8, freeze_at=0, num_classes=7, height=72, width=96,
                 min_object=0.2, anchor_sizes=(16, 32, 64), rpn_batch=64, pre_nms=300, post_nms=100, min_size=2,
                 rois_per_image=32, pooled=7, base_lr=0.08, warmup=20, batch=2, calibration_images=8),
    "small": dict(blocks=(3, 4, 6), head_blocks=3, base_width=64, freeze_at=2, num_classes=21, height=224, width=298,
                  min_object=0.1, anchor_sizes=(48, 96, 192), rpn_batch=256, pre_nms=2000, post_nms=500, min_size=6,
                  rois_per_image=16, pooled=14, base_lr=0.02, warmup=500, batch=1, calibration_images=8),
    "full": dict(blocks=(3, 4, 23), head_blocks=3, base_width=64, freeze_at=2, num_classes=21, height=600, width=800,
                 min_object=0.1, anchor_sizes=(128, 256, 512), rpn_batch=256, pre_nms=12000, post_nms=2000,
                 min_size=16, rois_per_image=128, pooled=14, base_lr=0.02, warmup=500, batch=1, calibration_images=4),
}
ANCHOR_RATIOS = (0.5, 1.0, 2.0)
STRIDE = 16
RPN_POSITIVE_IOU, RPN_NEGATIVE_IOU, RPN_POSITIVE_FRACTION = 0.7, 0.3, 0.5
RPN_NMS = 0.7
ROI_FOREGROUND_FRACTION, ROI_FOREGROUND_IOU, ROI_BACKGROUND_IOU = 0.25, 0.5, (0.0, 0.5)
SAMPLING_RATIO = 2
HEAD_BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)
RPN_BETA, HEAD_BETA = 1.0 / 9.0, 1.0
DELTA_CLIP = math.log(1000.0 / 16.0)
BN_EPS = 1e-5
# `trainscope list` for each preset; full is also the closed form in docs/workloads.md.
TRAINSCOPE_PARAMS = {"tiny": 289_521, "small": 33_163_615, "full": 52_103_519}


def extra_args(p):
    p.add_argument("--data-batches", type=int, default=8, help="synthetic batches built before timing, then cycled")


ARGS, RSS_BEFORE_IMPORT = common.prepare(
    __doc__, PRESETS,
    "assert each preset's parameter count is trainscope's (full: 52,103,519), print them, then exit",
    extra_args=extra_args)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    import torchvision.ops as tv_ops  # noqa: E402
except ImportError:  # the PyPI torch here comes without torchvision
    tv_ops = None


# ---------------------------------------------------------------- modules

class FrozenBatchNorm2d(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias with buffers only. While CALIBRATING, every
    forward folds its input's per-channel mean and variance into the statistics (an equal-weight
    average over the calibration forwards), as trainscope's FrozenBnCalibration."""
    calibrating = False

    def __init__(self, c, eps=BN_EPS):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(c))
        self.register_buffer("bias", torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.passes = 0
        self.sum_mean = torch.zeros(c, dtype=torch.float64)
        self.sum_square = torch.zeros(c, dtype=torch.float64)

    def forward(self, x):
        if FrozenBatchNorm2d.calibrating:
            with torch.no_grad():
                xd = x.detach().double()
                m = xd.mean(dim=(0, 2, 3))
                v = xd.var(dim=(0, 2, 3), unbiased=False)
                self.passes += 1
                self.sum_mean += m
                self.sum_square += v + m * m
                mu = self.sum_mean / self.passes
                self.running_mean.copy_(mu.float())
                self.running_var.copy_((self.sum_square / self.passes - mu * mu).clamp(min=0).float())
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1)


def conv(cin, cout, k, stride=1, padding=0, bias=False):
    return nn.Conv2d(cin, cout, k, stride=stride, padding=padding, bias=bias)


class Bottleneck(nn.Module):
    """MSRA bottleneck: the stride in the first 1x1; torchvision's child names."""

    def __init__(self, cin, width, stride):
        super().__init__()
        out = 4 * width
        self.conv1 = conv(cin, width, 1, stride)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = conv(width, width, 3, 1, 1)
        self.bn2 = FrozenBatchNorm2d(width)
        self.conv3 = conv(width, out, 1)
        self.bn3 = FrozenBatchNorm2d(out)
        self.downsample = nn.Sequential(conv(cin, out, 1, stride), FrozenBatchNorm2d(out)) \
            if stride != 1 or cin != out else None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNetC4(nn.Module):
    def __init__(self, p):
        super().__init__()
        w = p["base_width"]
        self.conv1 = conv(3, w, 7, 2, 3)
        self.bn1 = FrozenBatchNorm2d(w)
        cin = w
        for stage in range(3):
            blocks = []
            for b in range(p["blocks"][stage]):
                blocks.append(Bottleneck(cin, w << stage, 2 if stage > 0 and b == 0 else 1))
                cin = 4 * (w << stage)
            setattr(self, f"layer{stage + 1}", nn.Sequential(*blocks))
        if p["freeze_at"] >= 1:
            self.conv1.weight.requires_grad_(False)
        if p["freeze_at"] >= 2:
            for q in self.layer1.parameters():
                q.requires_grad_(False)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        return self.layer3(self.layer2(self.layer1(x)))


class RpnHead(nn.Module):
    def __init__(self, c, anchors):
        super().__init__()
        self.conv = conv(c, c, 3, 1, 1, bias=True)
        self.cls_logits = conv(c, 2 * anchors, 1, bias=True)
        self.bbox_pred = conv(c, 4 * anchors, 1, bias=True)
        for m in (self.conv, self.cls_logits, self.bbox_pred):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        t = F.relu(self.conv(x))
        return self.cls_logits(t), self.bbox_pred(t)


class RoiHead(nn.Module):
    def __init__(self, p):
        super().__init__()
        w = p["base_width"]
        cin = 16 * w
        blocks = []
        for b in range(p["head_blocks"]):
            blocks.append(Bottleneck(cin, 8 * w, 2 if b == 0 else 1))
            cin = 32 * w
        self.layer4 = nn.Sequential(*blocks)
        self.cls_score = nn.Linear(cin, p["num_classes"])
        self.bbox_pred = nn.Linear(cin, 4 * p["num_classes"])
        nn.init.normal_(self.cls_score.weight, 0.0, 0.01)
        nn.init.normal_(self.bbox_pred.weight, 0.0, 0.001)
        nn.init.zeros_(self.cls_score.bias)
        nn.init.zeros_(self.bbox_pred.bias)

    def forward(self, crops):
        y = torch.flatten(F.adaptive_avg_pool2d(self.layer4(crops), 1), 1)
        return self.cls_score(y), self.bbox_pred(y)


def init_convs_like_engine(model):
    """The engine's Conv2d initialisation (Kaiming normal, fan_out), before the heads' own."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


# ---------------------------------------------------------------- boxes (no gradients)

def cell_anchors(sizes, ratios, stride):
    c = stride / 2.0
    out = []
    for r in ratios:
        for s in sizes:
            w, h = s / math.sqrt(r), s * math.sqrt(r)
            out.append([c - w / 2, c - h / 2, c + w / 2, c + h / 2])
    return torch.tensor(out)


def grid_anchors(cell, fh, fw, stride):
    """(y, x, anchor) order: the row order of the RPN outputs permuted to NHWC."""
    ys, xs = torch.meshgrid(torch.arange(fh, dtype=torch.float32) * stride,
                            torch.arange(fw, dtype=torch.float32) * stride, indexing="ij")
    shifts = torch.stack([xs, ys, xs, ys], dim=-1).reshape(-1, 1, 4)
    return (shifts + cell.view(1, -1, 4)).reshape(-1, 4)


def box_iou(a, b):
    """[len(a), len(b)]; continuous coordinates (no +1)."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return torch.where(union > 0, inter / union, torch.zeros_like(inter))


def encode(ref, target, weights=(1.0, 1.0, 1.0, 1.0)):
    rw, rh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
    tw, th = target[:, 2] - target[:, 0], target[:, 3] - target[:, 1]
    rx, ry = ref[:, 0] + 0.5 * rw, ref[:, 1] + 0.5 * rh
    tx, ty = target[:, 0] + 0.5 * tw, target[:, 1] + 0.5 * th
    return torch.stack([weights[0] * (tx - rx) / rw, weights[1] * (ty - ry) / rh,
                        weights[2] * torch.log(tw / rw), weights[3] * torch.log(th / rh)], dim=1)


def decode(ref, d):
    rw, rh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
    rx, ry = ref[:, 0] + 0.5 * rw, ref[:, 1] + 0.5 * rh
    cx, cy = rx + d[:, 0] * rw, ry + d[:, 1] * rh
    w, h = rw * torch.exp(d[:, 2].clamp(max=DELTA_CLIP)), rh * torch.exp(d[:, 3].clamp(max=DELTA_CLIP))
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=1)


def clip(boxes, h, w):
    return torch.stack([boxes[:, 0].clamp(0, w), boxes[:, 1].clamp(0, h),
                        boxes[:, 2].clamp(0, w), boxes[:, 3].clamp(0, h)], dim=1)


def nms(boxes, scores, threshold, max_keep):
    """Greedy NMS in descending score order (ties: lower index first), stopping at max_keep."""
    if tv_ops is not None:
        return tv_ops.nms(boxes, scores, threshold)[:max_keep]
    order = torch.sort(scores, descending=True, stable=True).indices
    b = boxes[order]
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if suppressed[i]:
            continue
        keep.append(i)
        if len(keep) >= max_keep:
            break
        suppressed[i + 1:] |= box_iou(b[i:i + 1], b[i + 1:])[0] > threshold
    return order[torch.tensor(keep, dtype=torch.long)]


def sample(pool, k, gen):
    """k of `pool` without replacement (all when k >= len), in the order drawn."""
    if k >= len(pool):
        return pool
    return pool[torch.randperm(len(pool), generator=gen)[:max(k, 0)]]


def anchor_targets(anchors, gt, h, w, batch, gen):
    inside = torch.nonzero((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & (anchors[:, 2] <= w) &
                           (anchors[:, 3] <= h)).flatten()
    labels = torch.full((len(inside),), -1, dtype=torch.long)
    match = torch.zeros(len(inside), dtype=torch.long)
    if len(gt) == 0:
        labels.fill_(0)
    else:
        iou = box_iou(anchors[inside], gt)
        best, match = iou.max(dim=1)
        labels[best < RPN_NEGATIVE_IOU] = 0
        gt_best = iou.max(dim=0).values
        labels[((iou == gt_best[None]) & (gt_best[None] > 0)).any(dim=1)] = 1
        labels[best >= RPN_POSITIVE_IOU] = 1
    pos = sample(torch.nonzero(labels == 1).flatten(), int(batch * RPN_POSITIVE_FRACTION), gen)
    neg = sample(torch.nonzero(labels == 0).flatten(), batch - len(pos), gen)
    targets = encode(anchors[inside[pos]], gt[match[pos]]) if len(pos) else torch.zeros(0, 4)
    return inside[pos], inside[neg], targets


def proposals(anchors, fg_scores, deltas, h, w, p):
    boxes = clip(decode(anchors, deltas), h, w)
    ok = torch.isfinite(fg_scores) & torch.isfinite(boxes).all(dim=1) & \
        (boxes[:, 2] - boxes[:, 0] >= p["min_size"]) & (boxes[:, 3] - boxes[:, 1] >= p["min_size"])
    boxes, scores = boxes[ok], fg_scores[ok]
    top = torch.sort(scores, descending=True, stable=True).indices[:p["pre_nms"]]
    boxes, scores = boxes[top], scores[top]
    return boxes[nms(boxes, scores, RPN_NMS, p["post_nms"])]


def sample_rois(props, gt_boxes, gt_labels, batch, gen):
    cand = torch.cat([props, gt_boxes])
    if len(gt_boxes):
        best, match = box_iou(cand, gt_boxes).max(dim=1)
    else:
        best, match = torch.zeros(len(cand)), torch.zeros(len(cand), dtype=torch.long)
    area = (cand[:, 2] - cand[:, 0]) * (cand[:, 3] - cand[:, 1])
    fg = torch.nonzero((best >= ROI_FOREGROUND_IOU) & (len(gt_boxes) > 0)).flatten()
    bg = torch.nonzero((best < ROI_BACKGROUND_IOU[1]) & (best >= ROI_BACKGROUND_IOU[0]) & (area > 0)).flatten()
    fg = sample(fg, int(round(batch * ROI_FOREGROUND_FRACTION)), gen)
    bg = sample(bg, batch - len(fg), gen)
    rois = torch.cat([cand[fg], cand[bg]])
    labels = torch.cat([gt_labels[match[fg]], torch.zeros(len(bg), dtype=torch.long)])
    targets = encode(cand[fg], gt_boxes[match[fg]], HEAD_BOX_WEIGHTS) if len(fg) else torch.zeros(0, 4)
    return rois, labels, targets, len(fg)


# ---------------------------------------------------------------- RoIAlign

def _axis(v, size):
    """Bilinear corners and weights along one axis, the original RoIAlign kernel's rules: points
    more than a cell outside contribute nothing, the rest clamp to the map."""
    valid = ((v >= -1.0) & (v <= size)).to(v.dtype)
    v = v.clamp(min=0)
    low = v.floor().long()
    end = low >= size - 1
    low = torch.where(end, torch.full_like(low, size - 1), low)
    high = torch.where(end, low, low + 1)
    v = torch.where(end, low.to(v.dtype), v)
    frac = v - low.to(v.dtype)
    return low, high, (1 - frac) * valid, frac * valid


def roi_align_plain(feat, rois, pooled, scale, ratio):
    """RoIAlign (aligned=False, fixed sampling ratio) in plain torch: the samples of a RoI form a
    grid, so bilinear interpolation is a gather of rows, then of columns; autograd gives the
    backward. Output [R, C, pooled, pooled]."""
    n, c, h, w = feat.shape
    g = pooled * ratio
    t = torch.arange(pooled).repeat_interleave(ratio) + (torch.arange(ratio).repeat(pooled) + 0.5) / ratio
    x0, y0 = rois[:, 1] * scale, rois[:, 2] * scale
    rw = (rois[:, 3] * scale - x0).clamp(min=1.0)
    rh = (rois[:, 4] * scale - y0).clamp(min=1.0)
    ys = y0[:, None] + (rh / pooled)[:, None] * t[None]  # [R, g]
    xs = x0[:, None] + (rw / pooled)[:, None] * t[None]
    parts, order = [], []
    for b in range(n):
        sel = torch.nonzero(rois[:, 0] == b).flatten()
        if len(sel) == 0:
            continue
        r = len(sel)
        f = feat[b]
        yl, yh, wyl, wyh = _axis(ys[sel], h)
        xl, xh, wxl, wxh = _axis(xs[sel], w)
        rows = f.index_select(1, yl.flatten()) * wyl.flatten()[None, :, None] + \
            f.index_select(1, yh.flatten()) * wyh.flatten()[None, :, None]
        rows = rows.reshape(c, r, g, w)
        il = xl[None, :, None, :].expand(c, r, g, g)
        ih = xh[None, :, None, :].expand(c, r, g, g)
        s = rows.gather(3, il) * wxl[None, :, None, :] + rows.gather(3, ih) * wxh[None, :, None, :]
        parts.append(F.avg_pool2d(s.permute(1, 0, 2, 3), ratio))
        order.append(sel)
    out = torch.cat(parts)
    return out.index_select(0, torch.argsort(torch.cat(order)))


def roi_align(feat, rois, pooled, scale, ratio):
    if tv_ops is not None:
        return tv_ops.roi_align(feat, rois, (pooled, pooled), scale, ratio, aligned=False)
    return roi_align_plain(feat, rois, pooled, scale, ratio)


# ---------------------------------------------------------------- the detector

class FasterRCNN(nn.Module):
    def __init__(self, p, memory_format=torch.contiguous_format):
        super().__init__()
        self.p = p
        self.memory_format = memory_format
        self.backbone = ResNetC4(p)
        init_convs_like_engine(self.backbone)
        self.rpn = RpnHead(16 * p["base_width"], len(p["anchor_sizes"]) * len(ANCHOR_RATIOS))
        self.roi_head = RoiHead(p)
        init_convs_like_engine(self.roi_head.layer4)
        self.cell = cell_anchors(p["anchor_sizes"], ANCHOR_RATIOS, STRIDE)

    def forward_train(self, images, targets, gen):
        p = self.p
        n, _, h, w = images.shape
        k = p["num_classes"]
        features = self.backbone(images)
        objectness, deltas = self.rpn(features)
        fh, fw = features.shape[2:]
        per_image = fh * fw * len(self.cell)
        obj_rows = objectness.permute(0, 2, 3, 1).reshape(n * per_image, 2)
        delta_rows = deltas.permute(0, 2, 3, 1).reshape(n * per_image, 4)
        anchors = grid_anchors(self.cell, fh, fw, STRIDE)
        with torch.no_grad():
            fg_scores = torch.softmax(obj_rows.detach(), dim=1)[:, 1]
            d_host = delta_rows.detach()
            sampled, rpn_labels, positives, rpn_targets = [], [], [], []
            roi_rows, roi_labels, roi_targets, fg_rows = [], [], [], []
            rows = 0
            for i, (gt_boxes, gt_labels) in enumerate(targets):
                base = i * per_image
                pos, neg, t = anchor_targets(anchors, gt_boxes, h, w, p["rpn_batch"], gen)
                sampled += [pos + base, neg + base]
                rpn_labels += [torch.ones(len(pos), dtype=torch.long), torch.zeros(len(neg), dtype=torch.long)]
                positives.append(pos + base)
                rpn_targets.append(t)
                props = proposals(anchors, fg_scores[base:base + per_image], d_host[base:base + per_image], h, w, p)
                rois, labels, t, nfg = sample_rois(props, gt_boxes, gt_labels, p["rois_per_image"], gen)
                if len(rois) == 0:  # no proposal, no object: the whole image as one background RoI
                    rois, labels = torch.tensor([[0.0, 0.0, w, h]]), torch.zeros(1, dtype=torch.long)
                roi_rows.append(torch.cat([torch.full((len(rois), 1), float(i)), rois], dim=1))
                fg_rows.append((rows + torch.arange(nfg)) * k + labels[:nfg])
                roi_labels.append(labels)
                roi_targets.append(t)
                rows += len(rois)
            sampled, rpn_labels, positives = torch.cat(sampled), torch.cat(rpn_labels), torch.cat(positives)
            rpn_targets, roi_rows, roi_labels = torch.cat(rpn_targets), torch.cat(roi_rows), torch.cat(roi_labels)
            roi_targets, fg_rows = torch.cat(roi_targets), torch.cat(fg_rows)

        zero = lambda t: t.sum() * 0.0  # noqa: E731  (keeps every parameter in the graph)
        rpn_obj = F.cross_entropy(obj_rows[sampled], rpn_labels) if len(sampled) else zero(obj_rows)
        rpn_box = F.smooth_l1_loss(delta_rows[positives], rpn_targets, beta=RPN_BETA, reduction="sum") / \
            max(len(sampled), 1) if len(positives) else zero(delta_rows)
        crops = roi_align(features, roi_rows, p["pooled"], 1.0 / STRIDE, SAMPLING_RATIO)
        class_logits, box_deltas = self.roi_head(crops.contiguous(memory_format=self.memory_format))
        roi_cls = F.cross_entropy(class_logits, roi_labels)
        roi_box = F.smooth_l1_loss(box_deltas.reshape(-1, 4)[fg_rows], roi_targets, beta=HEAD_BETA,
                                   reduction="sum") / len(roi_rows) if len(fg_rows) else zero(box_deltas)
        return rpn_obj + rpn_box + roi_cls + roi_box


# ---------------------------------------------------------------- data

COLOURS = torch.tensor([[220, 40, 40], [40, 200, 60], [50, 70, 220], [230, 220, 50], [210, 60, 210]],
                       dtype=torch.float32)


def synthetic_batch(p, gen):
    """`batch` images, each 1-4 boxes filled with their class's colour (colour x brightness) on a
    noisy grey gradient, normalised to about zero mean and unit spread."""
    h, w, classes = p["height"], p["width"], p["num_classes"] - 1
    short = float(min(h, w))
    images, targets = [], []
    for _ in range(p["batch"]):
        grey = 60 + 130 * torch.rand(1, generator=gen).item()
        gx, gy = (torch.rand(2, generator=gen) * 80 - 40).tolist()
        img = grey + gx * (torch.arange(w) / w - 0.5)[None, None, :] + gy * (torch.arange(h) / h - 0.5)[None, :, None]
        img = img.expand(3, h, w) + 14 * torch.randn(3, h, w, generator=gen)
        boxes, labels = [], []
        for _ in range(1 + int(torch.randint(0, 4, (1,), generator=gen))):
            for _attempt in range(20):
                side = short * (p["min_object"] + (0.6 - p["min_object"]) * torch.rand(1, generator=gen).item())
                aspect = math.exp(math.log(0.6) + (math.log(1.6) - math.log(0.6)) * torch.rand(1, generator=gen).item())
                bw, bh = min(w, round(side * math.sqrt(aspect))), min(h, round(side / math.sqrt(aspect)))
                x1 = math.floor((w - bw + 1) * torch.rand(1, generator=gen).item())
                y1 = math.floor((h - bh + 1) * torch.rand(1, generator=gen).item())
                b = torch.tensor([[x1, y1, min(x1 + bw, w), min(y1 + bh, h)]], dtype=torch.float32)
                if b[0, 2] - b[0, 0] < 2 or b[0, 3] - b[0, 1] < 2:
                    continue
                if boxes and box_iou(torch.cat(boxes), b).max() > 0.3:
                    continue
                label = int(torch.randint(1, classes + 1, (1,), generator=gen))
                colour = COLOURS[(label - 1) % 5] * (1.0 - 0.1 * ((label - 1) // 5))
                xa, ya, xb, yb = [int(v) for v in b[0].tolist()]
                img[:, ya:yb, xa:xb] = colour[:, None, None] + 10 * torch.randn(3, yb - ya, xb - xa, generator=gen)
                boxes.append(b)
                labels.append(label)
                break
        images.append(((img.clamp(0, 255) / 255.0) - 0.45) / 0.225)
        targets.append((torch.cat(boxes) if boxes else torch.zeros(0, 4), torch.tensor(labels, dtype=torch.long)))
    return torch.stack(images), targets


# ---------------------------------------------------------------- run

def count_params(model):
    return sum(q.numel() for q in model.parameters())


def check_params():
    counts = {}
    for name in ("tiny", "small", "full"):
        counts[name] = count_params(FasterRCNN(PRESETS[name]))
        print(f"{name}: {counts[name]:,} parameters (trainscope: {TRAINSCOPE_PARAMS[name]:,})")
    for name, n in counts.items():
        assert n == TRAINSCOPE_PARAMS[name], f"{name} has {n:,} parameters, trainscope has {TRAINSCOPE_PARAMS[name]:,}"
    print("OK: every preset has trainscope's parameter count (full: 52,103,519)")


def run(args):
    p = dict(PRESETS[args.preset])
    if args.batch > 0:
        p["batch"] = args.batch
    batch = p["batch"]
    memory_format = common.configure_torch(args)
    gen = torch.Generator().manual_seed(args.seed)

    load_at_start = list(os.getloadavg())
    rss_before_model = common.rss_bytes()
    model = FasterRCNN(p, memory_format).to(memory_format=memory_format)
    model.train()
    n_params = count_params(model)
    trainable = [q for q in model.parameters() if q.requires_grad]
    base_lr = p["base_lr"] * batch / 16.0
    opt = torch.optim.SGD(trainable, lr=base_lr, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / p["warmup"]))

    data = []
    for _ in range(max(1, args.data_batches)):
        images, targets = synthetic_batch(p, gen)
        data.append((images.contiguous(memory_format=memory_format), targets))

    # Frozen batch-norm statistics from calibration_images training images (untimed).
    FrozenBatchNorm2d.calibrating = True
    with torch.no_grad():
        images, targets = data[0]
        model.forward_train(images, targets, gen)
        for i in range(batch, p["calibration_images"]):
            one, t = synthetic_batch(dict(p, batch=1), gen)
            model.forward_train(one.contiguous(memory_format=memory_format), t, gen)
    FrozenBatchNorm2d.calibrating = False

    state = {"i": 0}

    common.profile_layers(model)

    def step():
        images, targets = data[state["i"] % len(data)]
        state["i"] += 1
        with common.phase("forward"):
            loss = model.forward_train(images, targets, gen)
        common.backward_and_step(loss, opt, sched)
        return loss.item()

    timing = common.time_iterations(step, args.warmup, args.iters, restart=lambda: state.update(i=0))
    config = {
        "preset": args.preset,
        "image_size": f"{p['height']}x{p['width']}",
        "blocks": list(p["blocks"]) + [p["head_blocks"]],
        "base_width": p["base_width"],
        "num_classes": p["num_classes"],
        "batch_size": batch,
        "parameters": n_params,
        "trainable_parameters": sum(q.numel() for q in trainable),
        "memory_format": "channels_last" if args.channels_last else "contiguous (NCHW)",
        "compile": args.compile,
        "anchors": f"sizes {list(p['anchor_sizes'])} x ratios {list(ANCHOR_RATIOS)}, stride {STRIDE}",
        "rpn_batch": p["rpn_batch"],
        "proposals_train": f"top {p['pre_nms']} -> NMS {RPN_NMS} -> top {p['post_nms']}, min side {p['min_size']}",
        "rois_per_image": p["rois_per_image"],
        "roi_align": f"{p['pooled']}x{p['pooled']}, sampling ratio {SAMPLING_RATIO}, aligned=False, " +
                     ("torchvision.ops" if tv_ops is not None else "plain torch"),
        "nms": "torchvision.ops" if tv_ops is not None else "plain torch",
        "batch_norm": f"frozen, statistics from {p['calibration_images']} images",
        "frozen_layers": ["none", "conv1", "conv1, layer1"][p["freeze_at"]],
        "optimizer": "SGD momentum 0.9, weight decay 1e-4, frozen layers excluded",
        "learning_rate": f"{p['base_lr']} x batch/16 = {base_lr}, {p['warmup']}-iteration linear warm-up, constant",
        "data_batches": len(data),
        "warmup_iters": args.warmup,
        "timed_iters": args.iters,
        "seed": args.seed,
    }
    return common.make_result("faster_rcnn", config, timing, batch, RSS_BEFORE_IMPORT, rss_before_model,
                              load_at_start)


def main():
    if ARGS.check_params:
        check_params()
        return
    if ARGS.compile:
        raise SystemExit("faster_rcnn_train.py: --compile is not supported (the host-side box code breaks graphs)")
    r = run(ARGS)
    c = r["config"]
    common.emit(r, ARGS.json, f"faster_rcnn {c['preset']} {c['image_size']} batch {c['batch_size']}")


if __name__ == "__main__":
    main()
