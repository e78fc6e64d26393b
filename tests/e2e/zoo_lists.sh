# The torchvision model lists the suites share (sourced, not run).
# ZOO_FULL: every model `make test-zoo` takes (export_torchvision.py knows them all;
# vit_l_16, 1.2 GB, is left out). ZOO_TEST: the part `make test` takes, the models
# torchvision_c.sh compiles, so their exports are made once and shared; the rest
# (googlenet, inception_v3, regnet_y_400mf, maxvit_t, fcn_resnet50,
# lraspp_mobilenet_v3_large) cost CI more to export and convert than it can spend.
ZOO_FULL=resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,densenet121,googlenet,inception_v3,regnet_y_400mf,convnext_tiny,vit_b_16,swin_t,maxvit_t,deeplabv3_mobilenet_v3_large,fcn_resnet50,lraspp_mobilenet_v3_large
ZOO_TEST=resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,densenet121,vit_b_16,convnext_tiny,swin_t,deeplabv3_mobilenet_v3_large
# MIGC_ZOO, when set, replaces the list a suite would take.
