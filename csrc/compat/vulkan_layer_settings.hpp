// Force-included into ggml-vulkan.cpp (CMakeLists.txt) when the Vulkan headers predate
// VK_EXT_layer_settings (Debian 12 ships 1.3.239). ggml-vulkan uses the extension's three
// C++ types only to turn on validation-layer settings when asked (GGML_VULKAN_VALIDATE);
// these are the same layouts as in newer headers, so the struct works as a pNext entry
// with any loader that knows the extension, and is never chained otherwise.
//
// Only the C header is included: vulkan.hpp must first see ggml's own configuration
// (VULKAN_HPP_DISPATCH_LOADER_DYNAMIC, in ggml-vulkan-types.h), or every extension call
// would bind to a loader symbol that does not exist.
#pragma once

#include <vulkan/vulkan_core.h>

#include <cstdint>
#include <vector>

#ifndef VK_EXT_layer_settings
namespace vk {

enum class LayerSettingTypeEXT : int32_t {
    eBool32 = 0,
    eInt32 = 1,
    eInt64 = 2,
    eUint32 = 3,
    eUint64 = 4,
    eFloat32 = 5,
    eFloat64 = 6,
    eString = 7,
};

struct LayerSettingEXT {
    const char * pLayerName;
    const char * pSettingName;
    LayerSettingTypeEXT type;
    uint32_t valueCount;
    const void * pValues;
};

struct LayerSettingsCreateInfoEXT {
    explicit LayerSettingsCreateInfoEXT(const std::vector<LayerSettingEXT> & settings)
        : settingCount(static_cast<uint32_t>(settings.size())), pSettings(settings.data()) {}

    VkStructureType sType = static_cast<VkStructureType>(1000496000);  // ..._LAYER_SETTINGS_CREATE_INFO_EXT
    const void * pNext = nullptr;
    uint32_t settingCount;
    const LayerSettingEXT * pSettings;
};

}  // namespace vk
#endif
